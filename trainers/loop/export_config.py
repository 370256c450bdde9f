"""`nmtpipe export`'s options, checked once at the edge (no torch, no transformers here)."""

from __future__ import annotations

from dataclasses import dataclass

from nmtpipe.transforms.errors import ConfigError

FORMATS = ("hf", "ctranslate2")
QUANTIZATIONS = ("int8", "int8_float32", "float16", "float32")


@dataclass(frozen=True)
class ExportConfig:
    """What `nmtpipe export` was asked for."""

    checkpoint: str
    output: str
    format: str = "hf"
    quantization: str | None = None  # ctranslate2 only; None keeps float32
    max_positions: int = 1024  # the position table's length (longest input or output)
    scores: str | None = None  # a decode's scores.json, for the model card

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
