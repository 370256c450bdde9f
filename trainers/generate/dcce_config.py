"""`nmtpipe score`'s options, checked once at the edge (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from nmtpipe.trainers.generate.decode_config import JOB, MAX_TOKENS
from nmtpipe.trainers.runtime.run_files import SCORE_SUMMARY
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import option


@dataclass(frozen=True)
class DcceConfig:
    """`nmtpipe score`'s options: a `launch.Job` that scores a prepared dataset's train
    pairs by dual conditional cross-entropy (`transforms/quality/models/dcce.py`)."""

    name: ClassVar[str] = "score"
    summary_file: ClassVar[str] = SCORE_SUMMARY
    rerun: ClassVar[str] = "scores the shards not yet scored"

    prepared: str = option(metavar="URL", help="a prepared dataset (prepare's --output)")
    forward: str = option(
        metavar="URL",
        help="the forward model (source → target): a checkpoint of nmtpipe train, its "
        "--save-dir or the root of nmtpipe run (their best checkpoint)",
    )
    backward: str = option(metavar="URL", help="the backward model (target → source), likewise")
    output: str = option(
        None,
        metavar="URL",
        help="folder for the score files, one per train shard, named as the shard "
        "(default: PREPARED-dcce, beside the prepared dataset)",
    )
    max_tokens: int = option(
        MAX_TOKENS, metavar="N", group=JOB, help="padded tokens per batch, of the longer side"
    )

    def __post_init__(self) -> None:
        if self.output is None:  # (a frozen dataclass: its one default set here)
            object.__setattr__(self, "output", self.prepared.rstrip("/") + "-dcce")
        if self.max_tokens < 8:
            raise ConfigError("--max-tokens must be at least 8 (one padded row)")

    def run(self) -> dict[str, Any]:
        from nmtpipe.trainers.generate.dcce import score

        return score(self)
