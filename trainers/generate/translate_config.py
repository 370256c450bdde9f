"""`nmtpipe translate`'s options, checked once at the edge (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass

from nmtpipe.trainers.generate.decode_config import (
    JOB,
    batch_tokens_option,
    check_batching,
    source_positions_option,
    text_files,
)
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import nested, option

ENGINES = ("nmtpipe", "ctranslate2")


@dataclass(frozen=True)
class TranslateConfig:
    """`nmtpipe translate`'s options (fairseq-interactive's where the concept is the same)."""

    # engine nmtpipe
    checkpoint: str | None = option(None, metavar="URL", help="a checkpoint of nmtpipe train")
    # engine ctranslate2: an `nmtpipe export --format ctranslate2`
    model: str | None = option(
        None, metavar="DIR", help="a CTranslate2 export (--engine ctranslate2)"
    )
    engine: str = option("nmtpipe", choices=ENGINES, help="what translates")
    inputs: tuple[str, ...] = text_files("input", "raw text files instead of stdin (repeatable)")
    search: SearchConfig = nested(SearchConfig, group="search")
    max_tokens: int = batch_tokens_option()
    # sentences read ahead at most, sorted and decoded together
    buffer_size: int = option(1000, metavar="N", group=JOB, help="sentences read ahead at most")
    max_source_positions: int = source_positions_option()
    # intra-op threads
    threads: int = option(0, metavar="N", group=JOB, help="CPU threads; 0: every core")
    # engine nmtpipe: the encoded data, if not where training read it
    data: str | None = option(None, metavar="URL", help="the encoded data")

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
