"""`nmtpipe decode`'s options, checked once at the edge (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.transforms.errors import ConfigError


@dataclass(frozen=True)
class DecodeConfig:
    """`nmtpipe decode`'s options (flag names after fairseq-generate's)."""

    checkpoint: str
    output: str
    data: str | None = None  # an encode output; default: the one the model was trained on
    split: str = "test"
    inputs: tuple[str, ...] = ()  # raw text files instead of a split
    references: tuple[str, ...] = ()  # for `inputs`
    search: SearchConfig = field(default_factory=SearchConfig)
    max_tokens: int = 4096  # padded source tokens per batch
    buffer_size: int = 10_000  # sentences read, sorted and decoded together
    max_source_positions: int = 1024  # longer inputs are truncated (or skipped)
    skip_invalid_size_inputs: bool = False
    bleu_tokenize: str | None = None  # default: zh for Chinese targets, else 13a
    format: str | None = None
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        if self.references and not self.inputs:
            raise ConfigError("--reference goes with --input")
        check_batching(self.max_tokens, self.buffer_size, self.max_source_positions)


def check_batching(max_tokens: int, buffer_size: int, max_source_positions: int) -> None:
    """The batching options decode and translate share."""
    for flag, value in (("--max-tokens", max_tokens), ("--buffer-size", buffer_size)):
        if value < 1:
            raise ConfigError(f"{flag} must be at least 1")
    if max_source_positions < 2:
        raise ConfigError("--max-source-positions must be at least 2 (a token and EOS)")
