"""`nmtpipe train`'s options, checked once at the edge (no torch here: a workflow config
is read and checked before any job starts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from nmtpipe.trainers.generate.decode_config import MAX_TOKENS, shard_cache_option
from nmtpipe.trainers.model.config import PRESETS
from nmtpipe.trainers.runtime.run_files import SUMMARY
from nmtpipe.trainers.train.schedule import SCHEDULES
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import number_pair, option

BEST_METRICS = ("loss", "bleu")
# What defines the model a checkpoint holds (its shape: what `checkpoint.check_compatible`
# compares), which the checkpoints must match to be continued; every other option steers
# or extends its training.
MODEL_OPTIONS = ("arch", "dropout", "pre_norm", "model_overrides", "format")


@dataclass(frozen=True)
class TrainConfig:
    """`nmtpipe train`'s options (flag names after fairseq-train's): a `launch.Job`."""

    name: ClassVar[str] = "train"
    summary_file: ClassVar[str] = SUMMARY

    data: str = option(metavar="URL", help="a committed `nmtpipe encode` output")
    save_dir: str = option(metavar="URL", help="where checkpoints go")
    arch: str = option("transformer_tiny", choices=list(PRESETS), help="the model preset")
    max_tokens: int = option(
        MAX_TOKENS, metavar="N", help="tokens per batch and rank (fairseq's --max-tokens)"
    )
    max_update: int = option(1000, metavar="N", help="stop after this many updates")
    max_epoch: int = option(0, metavar="N", help="stop after this many epochs (0: no limit)")
    update_freq: int = option(1, metavar="N", help="batches per update (gradient accumulation)")
    lr: float = option(
        5e-4, metavar="LR", help="peak learning rate (inverse_sqrt) or T2T's constant (rsqrt)"
    )
    lr_scheduler: str = option(
        "inverse_sqrt", choices=SCHEDULES, help="warm-up then 1/sqrt(step): fairseq's or T2T's"
    )
    warmup_updates: int = option(4000, metavar="N", help="linear warm-up updates")
    label_smoothing: float = option(0.1, metavar="EPS", help="label smoothing of the cross entropy")
    clip_norm: float = option(0.0, metavar="NORM", help="clip gradients to this norm (0: off)")
    adam_betas: tuple[float, float] = option(
        (0.9, 0.98),
        parse=number_pair(float, "(0.9, 0.98)"),
        metavar="B1,B2",
        help="Adam's betas",
    )
    adam_eps: float = option(1e-8, metavar="EPS", help="Adam's epsilon")
    weight_decay: float = option(0.0, metavar="WD", help="Adam's weight decay")
    dropout: float | None = option(None, metavar="P", help="dropout (default: the preset's)")
    pre_norm: bool = option(False, help="layer norm before each block")
    seed: int = option(
        1, metavar="N", help="seed of the model's initialisation, dropout and batch order"
    )
    validate_interval_updates: int = option(
        0, metavar="N", help="validate every N updates (0: every epoch)"
    )
    save_interval_updates: int = option(
        0, metavar="N", help="save a checkpoint every N updates (0: every epoch)"
    )
    keep_interval_updates: int = option(5, metavar="N", help="numbered checkpoints kept")
    average_last: int = option(
        0,
        metavar="N",
        help="write checkpoint_avg.pt, the mean of the last N numbered checkpoints, at the "
        "end (0: no)",
    )
    best_checkpoint_metric: str = option(
        "loss",
        choices=BEST_METRICS,
        help="what checkpoint_best.pt and --patience follow; bleu: beam search on the "
        "validation split at every validation",
    )
    eval_bleu: bool = option(False, help="also score beam search at every validation")
    eval_bleu_beam: int = option(4, metavar="N", help="beam size of the validation BLEU")
    patience: int = option(
        0, metavar="N", help="stop after N validations without improvement (0: never)"
    )
    log_interval: int = option(50, metavar="N", help="a record in train_log.jsonl every N updates")
    format: str | None = option(
        None, choices=("arrow", "fairseq"), help="shards to read (default: the first the data has)"
    )
    cache_dir: str | None = shard_cache_option()
    compile: bool = option(False, help="torch.compile the model")
    tensorboard_logdir: str | None = option(None, metavar="DIR", help="write TensorBoard scalars")
    # resume a checkpoint of other data (from that data's start)
    reset_data: bool = option(
        False,
        aliases=("--reset-dataloader",),
        help="continue the checkpoint in --save-dir on other data than it was trained on "
        "(from the start of the new data; without it, a change of data is refused)",
    )
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_update", "update_freq", "log_interval"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if self.best_checkpoint_metric not in BEST_METRICS:
            raise ConfigError(
                f"--best-checkpoint-metric is one of {', '.join(BEST_METRICS)}, "
                f"not {self.best_checkpoint_metric!r}"
            )
        if self.eval_bleu_beam < 1:
            raise ConfigError("--eval-bleu-beam must be at least 1")
        if not 0 <= self.average_last <= self.keep_interval_updates:
            raise ConfigError(
                f"--average-last {self.average_last} needs that many numbered checkpoints "
                f"kept: raise --keep-interval-updates ({self.keep_interval_updates})"
            )
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError("--label-smoothing must be in [0, 1)")

    @property
    def evaluates_bleu(self) -> bool:
        """Whether each validation translates the validation split and scores it."""
        return self.eval_bleu or self.best_checkpoint_metric == "bleu"

    def model_options(self, default_format: str) -> dict[str, Any]:
        """The options that define the model (`MODEL_OPTIONS`), the shards' format
        resolved (`default_format`: the data's first)."""
        options = {name: getattr(self, name) for name in MODEL_OPTIONS}
        return options | {"format": self.format or default_format}

    @property
    def output(self) -> str:
        return self.save_dir

    @property
    def rerun(self) -> str:
        return f"resumes from the last checkpoint in {self.save_dir}"

    def run(self) -> dict[str, Any]:
        from nmtpipe.trainers.train.train import train

        return train(self)
