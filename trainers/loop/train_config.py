"""`nmtpipe train`'s options, checked once at the edge (no torch here: a workflow config
is read and checked before any job starts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nmtpipe.transforms.errors import ConfigError

BEST_METRICS = ("loss", "bleu")


@dataclass(frozen=True)
class TrainConfig:
    """`nmtpipe train`'s options (flag names after fairseq-train's)."""

    data: str
    save_dir: str
    arch: str = "transformer_tiny"
    max_tokens: int = 4096
    max_update: int = 1000
    max_epoch: int = 0  # 0: no limit
    update_freq: int = 1
    lr: float = 5e-4
    lr_scheduler: str = "inverse_sqrt"
    warmup_updates: int = 4000
    label_smoothing: float = 0.1
    clip_norm: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    dropout: float | None = None  # None: the preset's
    pre_norm: bool = False
    seed: int = 1
    validate_interval_updates: int = 0  # 0: at the end of each epoch
    save_interval_updates: int = 0  # 0: at the end of each epoch
    keep_interval_updates: int = 5
    average_last: int = 0  # at the end, average the last N numbered checkpoints; 0: no
    best_checkpoint_metric: str = "loss"  # or "bleu": what checkpoint_best.pt and patience follow
    eval_bleu: bool = False  # BLEU of beam search on the validation split at each validation
    eval_bleu_beam: int = 4
    patience: int = 0  # stop after this many validations without improvement; 0: never
    log_interval: int = 50
    format: str | None = None
    cache_dir: str | None = None
    compile: bool = False
    tensorboard_logdir: str | None = None
    reset_data: bool = False  # resume a checkpoint of other data (from that data's start)
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
