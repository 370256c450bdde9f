"""`nmtpipe train` on the command line: fairseq-train's flags → TrainConfig, and torchrun.

With `--nproc N` (N > 1) the command starts `torchrun --standalone --nproc_per_node N`
running itself; under torchrun (or with one process) it trains on its rank. Multi-node
jobs call torchrun directly with its rendezvous options (see docs/guides/scale.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.cli.torch_jobs import add_nproc, run_torch_job, shown_step
from nmtpipe.trainers.train.train_config import TrainConfig
from nmtpipe.transforms.storage.commit import StepOutcome

DESCRIPTION = """\
Train a translation model (a Transformer preset, or the GRU seq2seq: --arch rnn_gru) on
an encoded dataset (`nmtpipe encode`'s --output), with DDP over all ranks of a torchrun
job, token-based batches, label-smoothed cross entropy, Adam with warm-up, and
checkpoints in --save-dir (any fsspec URL): checkpoint_last.pt, checkpoint_best.pt (by
--best-checkpoint-metric), checkpoint{epoch}_{update}.pt, checkpoint_avg.pt (with
--average-last N), and learning_curve.svg at the end. Re-running the same command
resumes from checkpoint_last.pt at the exact batch it stopped at.

Records go to train_log.jsonl beside the checkpoints, one JSON line per --log-interval
updates (update, loss, nll_loss, lr, tokens/s) and per validation; stderr shows a
progress bar with the loss (or a line per interval) and a line per validation.

Integrity: every shard is checked against the sha256 its manifest records once per file
and machine, when the data is opened (the first rank of each machine reads each file
once before mapping it; the others wait), not on every read: a check per batch would
cost more than the training step. Checkpoints carry their own sha256 and are checked
whenever they are loaded. A damaged file stops the job with one line naming it.
"""
EPILOG = """\
examples:
  nmtpipe train --data runs/encoded --arch transformer_tiny --max-tokens 4096 \\
      --max-update 300 --save-dir runs/checkpoints
  nmtpipe train --data s3://bucket/encoded --arch transformer_base --max-tokens 8192 \\
      --max-update 100000 --save-dir s3://bucket/ckpt --nproc 8
  torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d \\
      --rdzv_endpoint head:29500 -m nmtpipe train --data ... --save-dir ...
"""


CONFIG = TrainConfig
PLAIN = {"nproc": int}  # what a workflow section may say besides the config's options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_nproc(flags.add_options(parser, CONFIG, "training")["training"])


def report(summary: dict[str, Any]) -> str:
    if summary.get("already_done"):
        return (
            f"already trained: {summary['updates']} updates reached --max-update "
            f"{summary['max_update']} (validation loss {summary['valid_loss']:.3f}); raise "
            "--max-update to train on"
        )
    return (
        f"trained to update {summary['updates']} (epoch {summary['epoch']}) in "
        f"{summary['seconds']} s, {summary['target_tokens_per_s']:,.0f} target tokens/s, "
        f"data loading {100 * summary['data_share']:.1f}% of the time; validation loss "
        f"{summary['valid_loss']:.3f}, perplexity {summary['valid_ppl']:.1f}"
    )


def shown(outcome: StepOutcome) -> logs.Shown:
    return shown_step(outcome, report, "model")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    return run_torch_job(flags.from_args(CONFIG, args), args, report)
