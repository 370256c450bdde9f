"""`nmtpipe train` on the command line: fairseq-train's flags → TrainConfig, and torchrun.

With `--nproc N` (N > 1) the command starts `torchrun --standalone --nproc_per_node N`
running itself; under torchrun (or with one process) it trains on its rank. Multi-node
jobs call torchrun directly with its rendezvous options (see the README).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.torch_jobs import run_torch_job
from nmtpipe.trainers.loop.schedule import SCHEDULES
from nmtpipe.trainers.loop.train_config import BEST_METRICS, TrainConfig
from nmtpipe.trainers.model.config import PRESETS
from nmtpipe.transforms.errors import ConfigError

SUMMARY = "train a Transformer or GRU model on an encoded dataset with torchrun/DDP"
DESCRIPTION = """\
Train a translation model (a Transformer preset, or the GRU seq2seq: --arch rnn_gru) on
an encoded dataset (`nmtpipe encode`'s --output), with DDP over all ranks of a torchrun
job, token-based batches, label-smoothed cross entropy, Adam with warm-up, and
checkpoints in --save-dir (any fsspec URL): checkpoint_last.pt, checkpoint_best.pt (by
--best-checkpoint-metric), checkpoint{epoch}_{update}.pt, checkpoint_avg.pt (with
--average-last N), and learning_curve.svg at the end. Re-running the same command
resumes from checkpoint_last.pt at the exact batch it stopped at.

Progress is printed as JSON lines (update, loss, nll_loss, lr, tokens/s, validation).
"""
EPILOG = """\
examples:
  nmtpipe train --data runs/encoded --arch transformer_tiny --max-tokens 4096 \\
      --max-update 300 --save-dir runs/checkpoints
  nmtpipe train --data s3://bucket/encoded --arch transformer_base --max-tokens 8192 \\
      --max-update 100000 --save-dir s3://bucket/ckpt --nproc 8
  torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 --rdzv_backend c10d \\
      --rdzv_endpoint head:29500 -m nmtpipe train --data ... --save-dir ...
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    main = parser.add_argument_group("training")
    main.add_argument("--data", metavar="URL", help="a committed `nmtpipe encode` output")
    main.add_argument("--save-dir", metavar="URL", help="where checkpoints go")
    main.add_argument("--arch", choices=list(PRESETS), default="transformer_tiny")
    main.add_argument("--nproc", type=int, default=1, help="processes on this machine")
    main.add_argument("--format", choices=["arrow", "fairseq"], help="shards to read")
    main.add_argument("--cache-dir", metavar="DIR", help="local cache for remote shards")
    numbers = {
        "--max-tokens": (int, 4096), "--max-update": (int, 1000), "--max-epoch": (int, 0),
        "--update-freq": (int, 1), "--lr": (float, 5e-4), "--warmup-updates": (int, 4000),
        "--label-smoothing": (float, 0.1), "--clip-norm": (float, 0.0),
        "--adam-eps": (float, 1e-8), "--weight-decay": (float, 0.0), "--seed": (int, 1),
        "--validate-interval-updates": (int, 0), "--save-interval-updates": (int, 0),
        "--keep-interval-updates": (int, 5), "--patience": (int, 0), "--log-interval": (int, 50),
        "--average-last": (int, 0), "--eval-bleu-beam": (int, 4),
    }  # fmt: skip
    for flag, (kind, default) in numbers.items():
        main.add_argument(flag, type=kind, default=default, help=f"default: {default}")
    main.add_argument("--lr-scheduler", choices=SCHEDULES, default="inverse_sqrt")
    main.add_argument("--best-checkpoint-metric", choices=BEST_METRICS, default="loss",
                      help="what checkpoint_best.pt and --patience follow; bleu: beam search "
                      "on the validation split at every validation")  # fmt: skip
    main.add_argument(
        "--eval-bleu", action="store_true", help="also score beam search at every validation"
    )
    main.add_argument("--adam-betas", default="(0.9, 0.98)", help="default: (0.9, 0.98)")
    main.add_argument("--dropout", type=float, help="default: the preset's")
    main.add_argument("--pre-norm", action="store_true", help="layer norm before each block")
    main.add_argument("--compile", action="store_true", help="torch.compile the model")
    main.add_argument("--tensorboard-logdir", metavar="DIR", help="write TensorBoard scalars")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    if not args.data or not args.save_dir:
        raise ConfigError("--data and --save-dir are required")
    try:
        betas = tuple(float(x) for x in args.adam_betas.strip("()[] ").split(","))
    except ValueError:
        raise ConfigError(
            f"--adam-betas wants two numbers like (0.9, 0.98), not {args.adam_betas!r}"
        ) from None
    names = [
        "max_tokens", "max_update", "max_epoch", "update_freq", "lr", "lr_scheduler",
        "warmup_updates", "label_smoothing", "clip_norm", "adam_eps", "weight_decay",
        "dropout", "pre_norm", "seed", "validate_interval_updates", "save_interval_updates",
        "keep_interval_updates", "patience", "log_interval", "format", "cache_dir", "compile",
        "tensorboard_logdir", "average_last", "best_checkpoint_metric", "eval_bleu",
        "eval_bleu_beam",
    ]  # fmt: skip
    return TrainConfig(
        data=args.data, save_dir=args.save_dir, arch=args.arch, adam_betas=betas,
        **{name: getattr(args, name) for name in names},
    )  # fmt: skip


def show(summary: dict[str, Any]) -> None:
    """The summary as a JSON line on stdout, and one line for the user on stderr."""
    print(json.dumps({"summary": summary}), flush=True)
    logs.progress(
        f"trained to update {summary['updates']} (epoch {summary['epoch']}) in "
        f"{summary['seconds']} s, {summary['target_tokens_per_s']:,.0f} target tokens/s, "
        f"data loading {100 * summary['data_share']:.1f}% of the time; validation loss "
        f"{summary['valid_loss']:.3f}, perplexity {summary['valid_ppl']:.1f}"
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    return run_torch_job(config_from_args(args), args, beam_args, show)
