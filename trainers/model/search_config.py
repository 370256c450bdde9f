"""What beam search searches with (`nmtpipe decode --beam/--alpha/--lenpen/...`).

No torch import here: configs are read and checked before any job starts (a workflow
config, `--help`); the methods work on the tensors the search passes in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nmtpipe.transforms.options import option

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True)
class SearchConfig:
    """What `nmtpipe decode` searches with (flags `--beam`, `--alpha`/`--lenpen`, ...)."""

    beam: int = option(4, metavar="N", help="beam size (1: greedy)")
    nbest: int = option(1, metavar="N", help="hypotheses kept per sentence")
    alpha: float = option(0.6, metavar="ALPHA", help="T2T's GNMT length penalty exponent")
    # fairseq's; when set, the fairseq convention is used
    lenpen: float | None = option(
        None, metavar="L", help="fairseq's length penalty and stopping rule (default: T2T's)"
    )
    max_len_a: float | None = option(
        None, metavar="A", help="longest output a*src_len+b (default: T2T 1, fairseq 0)"
    )
    max_len_b: int | None = option(None, metavar="B", help="(default: T2T 50, fairseq 200)")
    # tokens before EOS at least
    min_len: int = option(0, metavar="N", help="shortest translation, in tokens")
    no_repeat_ngram_size: int = option(
        0, metavar="N", help="forbid repeating n-grams of this size (0: off)"
    )
    unk_penalty: float = option(0.0, metavar="P", help="subtracted from <unk>'s score")

    def __post_init__(self) -> None:
        if self.beam < 1 or not 1 <= self.nbest <= self.beam:
            raise ValueError(f"need beam >= 1 and 1 <= nbest <= beam, not {self.beam}/{self.nbest}")
        if self.alpha < 0 or (self.lenpen is not None and self.lenpen < 0):
            raise ValueError("length penalties must not be negative")
        if self.min_len < 0 or self.no_repeat_ngram_size < 0:
            raise ValueError("--min-len and --no-repeat-ngram-size must not be negative")

    @property
    def convention(self) -> str:
        return "t2t" if self.lenpen is None else "fairseq"

    def max_lengths(self, src_lengths: Tensor) -> Tensor:
        """Per sentence: T2T, tokens including EOS; fairseq, tokens before the forced EOS."""
        t2t = self.convention == "t2t"
        a = self.max_len_a if self.max_len_a is not None else (1.0 if t2t else 0.0)
        b = self.max_len_b if self.max_len_b is not None else (50 if t2t else 200)
        return (a * src_lengths.double() + b).long().clamp(min=1)

    def score(self, log_prob: Tensor, length: int | Tensor) -> Tensor:
        """The score hypotheses are ranked by; `length` counts the EOS."""
        if self.lenpen is not None:
            return log_prob / _like(length, log_prob) ** self.lenpen
        return log_prob / self.gnmt_penalty(length, log_prob)

    def gnmt_penalty(self, length: int | Tensor, like: Tensor) -> Tensor:
        """T2T's `((5 + length) / 6) ** alpha`, in `like`'s dtype and device."""
        return ((5.0 + _like(length, like)) / 6.0) ** self.alpha


def _like(length: int | Tensor, like: Tensor) -> Tensor:
    """`length` as a tensor of `like`'s dtype and device."""
    return length.to(like.dtype) if hasattr(length, "to") else like.new_full((), length)
