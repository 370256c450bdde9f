"""`nmtpipe export`'s options, checked once at the edge (no torch, no transformers here)."""

from __future__ import annotations

from dataclasses import dataclass

from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import option

KIND = "nmtpipe.export"  # the kind its manifest records, which readers check
FORMATS = ("hf", "ctranslate2")
QUANTIZATIONS = ("int8", "int8_float32", "float16", "float32")


@dataclass(frozen=True)
class ExportConfig:
    """What `nmtpipe export` was asked for."""

    checkpoint: str = option(metavar="URL", help="a checkpoint of nmtpipe train")
    output: str = option(metavar="URL", help="folder for the exported model")
    format: str = option("hf", choices=FORMATS, help="what to write")
    # ctranslate2 only; None keeps float32
    quantization: str | None = option(
        None, choices=QUANTIZATIONS, help="CTranslate2 weights; none: float32"
    )
    # the position table's length
    max_positions: int = option(1024, metavar="N", help="longest input or output, in tokens")
    scores: str | None = option(None, metavar="URL", help="a decode's scores.json for the card")

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"unknown --format {self.format!r}; choose from {', '.join(FORMATS)}")
        if self.quantization is not None and self.format != "ctranslate2":
            raise ConfigError("--quantization goes with --format ctranslate2")
        if self.quantization not in (None, *QUANTIZATIONS):
            raise ConfigError(
                f"unknown --quantization {self.quantization!r}; choose from "
                f"{', '.join(QUANTIZATIONS)}"
            )
        if self.max_positions < 2:
            raise ConfigError("--max-positions must be at least 2")
