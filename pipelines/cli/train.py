"""`nmtpipe train` on the command line: fairseq-train's flags → TrainConfig, and torchrun.

With `--nproc N` (N > 1) the command starts `torchrun --standalone --nproc_per_node N`
running itself; under torchrun (or with one process) it trains on its rank. Multi-node
jobs call torchrun directly with its rendezvous options (see the README).
"""

from __future__ import annotations

import argparse
from typing import Any

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.torch_jobs import add_numbers, run_torch_job
from nmtpipe.trainers.loop.schedule import SCHEDULES
from nmtpipe.trainers.loop.train_config import BEST_METRICS, TrainConfig
from nmtpipe.trainers.model.config import PRESETS
from nmtpipe.transforms.errors import ConfigError

DESCRIPTION = """\
Train a translation model (a Transformer preset, or the GRU seq2seq: --arch rnn_gru) on
an encoded dataset (`nmtpipe encode`'s --output), with DDP over all ranks of a torchrun
job, token-based batches, label-smoothed cross entropy, Adam with warm-up, and
checkpoints in --save-dir (any fsspec URL): checkpoint_last.pt, checkpoint_best.pt (by
--best-checkpoint-metric), checkpoint{epoch}_{update}.pt, checkpoint_avg.pt (with
--average-last N), and learning_curve.svg at the end. Re-running the same command
resumes from checkpoint_last.pt at the exact batch it stopped at.

Progress is printed as JSON lines on stdout (update, loss, nll_loss, lr, tokens/s,
validation), the last one the result; a progress bar (or a line per interval) on stderr.

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
  torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 --rdzv_backend c10d \\
      --rdzv_endpoint head:29500 -m nmtpipe train --data ... --save-dir ...
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    main = parser.add_argument_group("training")
    main.add_argument("--data", metavar="URL", help="a committed `nmtpipe encode` output")
    main.add_argument("--save-dir", metavar="URL", help="where checkpoints go")
    main.add_argument(
        "--arch", choices=list(PRESETS), default="transformer_tiny", help="the model preset"
    )
    main.add_argument(
        "--nproc",
        type=int,
        default=1,
        help="processes on this machine (torchrun --standalone when above 1)",
    )
    main.add_argument(
        "--format",
        choices=["arrow", "fairseq"],
        help="shards to read (default: the first the data has)",
    )
    main.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="local cache for remote shards (default: ~/.cache/nmtpipe/shards)",
    )
    numbers = {
        "--max-tokens": (int, 4096, "tokens per batch and rank (fairseq's --max-tokens)"),
        "--max-update": (int, 1000, "stop after this many updates"),
        "--max-epoch": (int, 0, "stop after this many epochs (0: no limit)"),
        "--update-freq": (int, 1, "batches per update (gradient accumulation)"),
        "--lr": (float, 5e-4, "peak learning rate (inverse_sqrt) or T2T's constant (rsqrt)"),
        "--warmup-updates": (int, 4000, "linear warm-up updates"),
        "--label-smoothing": (float, 0.1, "label smoothing of the cross entropy"),
        "--clip-norm": (float, 0.0, "clip gradients to this norm (0: off)"),
        "--adam-eps": (float, 1e-8, "Adam's epsilon"),
        "--weight-decay": (float, 0.0, "Adam's weight decay"),
        "--seed": (int, 1, "seed of the model's initialisation, dropout and batch order"),
        "--validate-interval-updates": (int, 0, "validate every N updates (0: every epoch)"),
        "--save-interval-updates": (int, 0, "save a checkpoint every N updates (0: every epoch)"),
        "--keep-interval-updates": (int, 5, "numbered checkpoints kept"),
        "--patience": (int, 0, "stop after N validations without improvement (0: never)"),
        "--log-interval": (int, 50, "a JSON line on stdout every N updates"),
        "--average-last": (int, 0, "write checkpoint_avg.pt, the mean of the last N numbered "
                           "checkpoints, at the end (0: no)"),
        "--eval-bleu-beam": (int, 4, "beam size of the validation BLEU"),
    }  # fmt: skip
    add_numbers(main, numbers)
    main.add_argument(
        "--lr-scheduler",
        choices=SCHEDULES,
        default="inverse_sqrt",
        help="warm-up then 1/sqrt(step): fairseq's or T2T's",
    )
    main.add_argument("--best-checkpoint-metric", choices=BEST_METRICS, default="loss",
                      help="what checkpoint_best.pt and --patience follow; bleu: beam search "
                      "on the validation split at every validation")  # fmt: skip
    main.add_argument(
        "--eval-bleu", action="store_true", help="also score beam search at every validation"
    )
    main.add_argument("--adam-betas", default="(0.9, 0.98)", help="Adam's betas")
    main.add_argument("--dropout", type=float, help="dropout (default: the preset's)")
    main.add_argument("--pre-norm", action="store_true", help="layer norm before each block")
    main.add_argument("--compile", action="store_true", help="torch.compile the model")
    main.add_argument("--tensorboard-logdir", metavar="DIR", help="write TensorBoard scalars")
    main.add_argument(
        "--reset-data",
        "--reset-dataloader",
        dest="reset_data",
        action="store_true",
        help="continue the checkpoint in --save-dir on other data than it was trained on "
        "(from the start of the new data; without it, a change of data is refused)",
    )


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
        "eval_bleu_beam", "reset_data",
    ]  # fmt: skip
    return TrainConfig(
        data=args.data, save_dir=args.save_dir, arch=args.arch, adam_betas=betas,
        **{name: getattr(args, name) for name in names},
    )  # fmt: skip


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


def show(summary: dict[str, Any]) -> None:
    logs.show("train", summary, report(summary))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    return run_torch_job(config_from_args(args), args, beam_args, show)
