"""`nmtpipe translate`'s options, checked once at the edge (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nmtpipe.trainers.loop.decode_config import check_batching
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.transforms.errors import ConfigError

ENGINES = ("nmtpipe", "ctranslate2")


@dataclass(frozen=True)
class TranslateConfig:
    """`nmtpipe translate`'s options (fairseq-interactive's where the concept is the same)."""

    checkpoint: str | None = None  # engine nmtpipe
    model: str | None = None  # engine ctranslate2: an `nmtpipe export --format ctranslate2`
    engine: str = "nmtpipe"
    inputs: tuple[str, ...] = ()  # raw text files; none: stdin
    search: SearchConfig = field(default_factory=SearchConfig)
    max_tokens: int = 4096  # padded source tokens per batch
    buffer_size: int = 1000  # sentences read ahead at most, sorted and decoded together
    max_source_positions: int = 1024  # longer inputs are truncated (EOS kept)
    threads: int = 0  # intra-op threads; 0: every core
    data: str | None = None  # engine nmtpipe: the encoded data, if not where training read it

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown --engine {self.engine!r}; choose from {', '.join(ENGINES)}")
        if self.engine == "nmtpipe" and not self.checkpoint:
            raise ConfigError("--checkpoint is required (or --engine ctranslate2 --model DIR)")
        if self.engine == "ctranslate2":
            if not self.model:
                raise ConfigError("--engine ctranslate2 needs --model DIR (a CTranslate2 export)")
            if self.search.convention != "fairseq":
                raise ConfigError("CTranslate2 scores as fairseq does: give --lenpen (e.g. 1.0)")
            if self.search.unk_penalty:
                raise ConfigError("CTranslate2 has no --unk-penalty")
        check_batching(self.max_tokens, self.buffer_size, self.max_source_positions)
        if self.threads < 0:
            raise ConfigError("--threads must not be negative")
