"""`nmtpipe decode`'s options, checked once at the edge (no torch here), and the options
it shares with translate and train."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.runtime.run_files import SCORES
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import nested, option

JOB = "job"  # the help group of the batching options
MAX_TOKENS = 4096  # tokens per batch (and rank): fairseq's --max-tokens of its examples


def shard_cache_option() -> Any:
    """--cache-dir of the jobs that read shards (train, decode)."""
    return option(
        None, metavar="DIR", help="local cache for remote shards (default: ~/.cache/nmtpipe/shards)"
    )


def text_files(name: str, help: str) -> Any:
    """Raw text files, the option repeated for more (decode's and translate's)."""
    return option((), name=name, repeat=True, metavar="FILE", help=help)


def batch_tokens_option() -> Any:
    """--max-tokens of decode and translate: padded source tokens per batch."""
    return option(MAX_TOKENS, metavar="N", group=JOB, help="source tokens per batch")


def source_positions_option() -> Any:
    """--max-source-positions of decode and translate (EOS kept)."""
    return option(1024, metavar="N", group=JOB, help="longer inputs are truncated")


@dataclass(frozen=True)
class DecodeConfig:
    """`nmtpipe decode`'s options (flag names after fairseq-generate's): a `launch.Job`."""

    name: ClassVar[str] = "decode"
    summary_file: ClassVar[str] = SCORES
    rerun: ClassVar[str] = "decodes again"

    checkpoint: str = option(
        aliases=("--path",),
        metavar="URL",
        help="a checkpoint of nmtpipe train (--path: fairseq's name)",
    )
    output: str = option(metavar="URL", help="folder for the outputs")
    data: str | None = option(
        None, metavar="URL", help="an encode output (default: the training data)"
    )
    split: str = option(
        "test", aliases=("--gen-subset",), help="the split of --data (--gen-subset: fairseq's name)"
    )
    inputs: tuple[str, ...] = text_files(
        "input", "raw text to translate instead of a split (repeatable)"
    )
    references: tuple[str, ...] = text_files(
        "reference", "references of --input, line by line (repeatable)"
    )
    search: SearchConfig = nested(SearchConfig, group="search")
    max_tokens: int = batch_tokens_option()
    # sentences read, sorted and decoded together
    buffer_size: int = option(10_000, metavar="N", group=JOB, help="sentences per window")
    max_source_positions: int = source_positions_option()  # or skipped
    skip_invalid_size_inputs: bool = option(
        False, group=JOB, help="skip longer inputs (an empty line in hypotheses.txt)"
    )
    bleu_tokenize: str | None = option(
        None,
        aliases=("--sacrebleu-tokenizer", "--tokenize"),
        metavar="NAME",
        help="sacrebleu's tokenizer (default: zh for Chinese targets, else 13a)",
    )
    format: str | None = option(
        None, choices=("arrow", "fairseq"), help="ids (default: as trained)"
    )
    cache_dir: str | None = shard_cache_option()

    def __post_init__(self) -> None:
        if self.references and not self.inputs:
            raise ConfigError("--reference goes with --input")
        check_batching(self.max_tokens, self.buffer_size, self.max_source_positions)

    def run(self) -> dict[str, Any]:
        from nmtpipe.trainers.generate.decode import decode

        return decode(self)


def check_batching(max_tokens: int, buffer_size: int, max_source_positions: int) -> None:
    """The batching options decode and translate share."""
    for flag, value in (("--max-tokens", max_tokens), ("--buffer-size", buffer_size)):
        if value < 1:
            raise ConfigError(f"{flag} must be at least 1")
    if max_source_positions < 2:
        raise ConfigError("--max-source-positions must be at least 2 (a token and EOS)")
