"""Per-pair filters, and the names of every reason a pair can be rejected for.

Lengths are counted in characters and in Tensor2Tensor tokens; the ratio test uses
characters because T2T tokens are not comparable across scripts (a Chinese sentence is
often one or two tokens). The checks run over a whole chunk at once with numpy; only
the rejected pairs get a Python-built explanation.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from nmtpipe.transforms.text import t2t_tokenizer

INVALID_UTF8 = "invalid-utf8"
EMPTY = "empty"
TOO_LONG = "too-long"
LENGTH_RATIO = "length-ratio"
COPY = "copy"
DUPLICATE = "duplicate"
BAD_COLUMNS = "bad-columns"
REASONS = (INVALID_UTF8, EMPTY, TOO_LONG, LENGTH_RATIO, COPY, DUPLICATE, BAD_COLUMNS)


class Verdict(NamedTuple):
    reason: str
    detail: str


@dataclass(frozen=True)
class FilterConfig:
    """Limits applied to each normalised pair (the ratio after Moses' clean-corpus-n)."""

    max_chars: int = 1024
    max_tokens: int = 256
    max_length_ratio: float = 9.0
    drop_copies: bool = True

    def __post_init__(self) -> None:
        if self.max_chars < 1 or self.max_tokens < 1:
            raise ValueError("length limits must be at least 1")
        if self.max_length_ratio < 1:
            raise ValueError("the length ratio limit must be at least 1")


def _too_long(text: str, config: FilterConfig) -> str | None:
    if len(text) > config.max_chars:
        return f"{len(text)} characters (limit {config.max_chars})"
    # A token has at least one character, so only long lines can have too many.
    if len(text) > config.max_tokens:
        n = len(t2t_tokenizer.encode(text))
        if n > config.max_tokens:
            return f"{n} tokens (limit {config.max_tokens})"
    return None


def check_pairs(src: list[str], tgt: list[str], config: FilterConfig) -> dict[int, Verdict]:
    """Verdicts for the pairs that must go, by index; the first failing check wins.

    Checks in order: empty side, too long (characters, then T2T tokens), length ratio,
    target a copy of the source (ignoring case).
    """
    n = len(src)
    ls = np.fromiter(map(len, src), dtype=np.int64, count=n)
    lt = np.fromiter(map(len, tgt), dtype=np.int64, count=n)
    verdicts: dict[int, Verdict] = {}
    for i in np.flatnonzero((ls == 0) | (lt == 0)).tolist():
        sides = [name for name, length in (("src", ls[i]), ("tgt", lt[i])) if length == 0]
        verdicts[i] = Verdict(EMPTY, f"{' and '.join(sides)} empty after normalisation")
    limit = min(config.max_chars, config.max_tokens)
    for i in np.flatnonzero((ls > limit) | (lt > limit)).tolist():
        if i in verdicts:
            continue
        for name, text in (("src", src[i]), ("tgt", tgt[i])):
            why = _too_long(text, config)
            if why is not None:
                verdicts[i] = Verdict(TOO_LONG, f"{name} has {why}")
                break
    ratio = np.maximum(ls, lt) / np.maximum(np.minimum(ls, lt), 1)
    for i in np.flatnonzero(ratio > config.max_length_ratio).tolist():
        if i not in verdicts:
            verdicts[i] = Verdict(
                LENGTH_RATIO,
                f"{ls[i]} vs {lt[i]} characters, ratio {ratio[i]:.1f} "
                f"(limit {config.max_length_ratio:g})",
            )
    if config.drop_copies:
        same = map(operator.eq, map(str.casefold, src), map(str.casefold, tgt))
        for i in np.flatnonzero(np.fromiter(same, dtype=bool, count=n)).tolist():
            verdicts.setdefault(i, Verdict(COPY, "target is a copy of the source"))
    return verdicts
