"""Per-pair filters, and the names of every reason a pair can be rejected for.

Lengths are counted in characters and in Tensor2Tensor tokens. The ratio test uses
characters weighted by script (`scripts.WEIGHTS`: a Han character counts as three Latin
letters, a Hangul syllable as two, a kana as one and a half), because neither raw
characters nor T2T tokens are comparable across scripts: an English sentence has about
three times the characters of its Chinese translation, and a Chinese sentence is often
one or two T2T tokens. The checks run over a whole chunk at once with numpy; only the
rejected pairs get a Python-built explanation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from nmtpipe.transforms.corpus import raw_corpus
from nmtpipe.transforms.options import option, positive_int
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.langid import scripts
from nmtpipe.transforms.text.side_text import SideText

INVALID_UTF8 = raw_corpus.INVALID_UTF8
UNDECODABLE = raw_corpus.UNDECODABLE  # not valid in its encoding, one other than UTF-8
BAD_RECORD = raw_corpus.BAD_RECORD  # a record its reader could take no pair from
EMPTY = "empty"
TOO_LONG = raw_corpus.TOO_LONG  # also what a reader says of a line it does not read whole
MAX_CHARS = raw_corpus.MAX_RECORD_BYTES // 4  # a line of as many 4-byte characters fits
LENGTH_RATIO = "length-ratio"
COPY = "copy"
WRONG_LANGUAGE = "wrong-language"
DUPLICATE = "duplicate"
OVERLAP = "overlap"
BAD_COLUMNS = raw_corpus.BAD_COLUMNS
REASONS = (
    INVALID_UTF8,
    UNDECODABLE,
    BAD_RECORD,
    EMPTY,
    TOO_LONG,
    LENGTH_RATIO,
    COPY,
    WRONG_LANGUAGE,
    DUPLICATE,
    OVERLAP,
    BAD_COLUMNS,
)


class Verdict(NamedTuple):
    reason: str
    detail: str


def _max_chars(text: str) -> int:
    value = positive_int(text)
    if value > MAX_CHARS:
        raise ValueError(f"at most {MAX_CHARS:,}: a reader holds no longer line")
    return value


@dataclass(frozen=True)
class FilterConfig:
    """Limits applied to each normalised pair.

    `max_length_ratio` is in script-weighted characters: on NTREX-128's 1,997 en-zh
    pairs (all correct translations) the largest ratio is 4.0, on Tatoeba's 32k pairs
    (short lines, where a ratio swings most) 5.1 for one pair and at most 4.4 for the
    rest, so 5 rejects no correct translation of either while a long line paired with a
    short one (a misaligned pair) goes.
    """

    max_chars: int = option(
        1024,
        metavar="N",
        parse=_max_chars,
        help="too-long: a side of more than N characters (after normalisation; at most "
        f"{MAX_CHARS:,}: readers hold a line of up to {raw_corpus.MAX_RECORD_BYTES:,} bytes)",
    )
    max_t2t_tokens: int = option(
        256,
        metavar="N",
        help="too-long: a side of more than N Tensor2Tensor tokens",
    )
    max_length_ratio: float = option(
        5.0,
        metavar="R",
        help="length-ratio: the longer side more than R times the shorter, in characters "
        "weighted by script (Han 3, Hangul 2, kana 1.5, others 1), so that English and "
        "Chinese compare; no correct NTREX-128 or Tatoeba en-zh pair passes 5.1",
    )
    drop_copies: bool = option(
        True,
        name="keep_copies",
        invert=True,
        help="keep copy pairs (target equal to the source, ignoring case, spaces and punctuation)",
    )

    def __post_init__(self) -> None:
        if self.max_chars < 1 or self.max_t2t_tokens < 1:
            raise ValueError("length limits must be at least 1")
        if self.max_length_ratio < 1:
            raise ValueError("the length ratio limit must be at least 1")


def _too_long(text: str, config: FilterConfig) -> str | None:
    if len(text) > config.max_chars:
        return f"{len(text)} characters (limit {config.max_chars})"
    # A token has at least one character, so only long lines can have too many.
    if len(text) > config.max_t2t_tokens:
        n = len(t2t_tokenizer.encode(text))
        if n > config.max_t2t_tokens:
            return f"{n} tokens (limit {config.max_t2t_tokens})"
    return None


def length_ratios(src: SideText, tgt: SideText) -> np.ndarray:
    """Longer side over shorter side, in script-weighted characters, per pair."""
    ws, wt = src.weighted, tgt.weighted
    return np.maximum(ws, wt) / np.maximum(np.minimum(ws, wt), 1)


def check_pairs(src: SideText, tgt: SideText, config: FilterConfig) -> dict[int, Verdict]:
    """Verdicts for the pairs that must go, by index; the first failing check wins.

    Checks in order: empty side, too long (characters, then T2T tokens), length ratio,
    target a copy of the source (ignoring case, spaces and punctuation).
    """
    ls, lt = src.lengths, tgt.lengths
    verdicts: dict[int, Verdict] = {}
    for i in np.flatnonzero((ls == 0) | (lt == 0)).tolist():
        sides = [name for name, length in (("src", ls[i]), ("tgt", lt[i])) if length == 0]
        verdicts[i] = Verdict(EMPTY, f"{' and '.join(sides)} empty after normalisation")
    limit = min(config.max_chars, config.max_t2t_tokens)
    for i in np.flatnonzero((ls > limit) | (lt > limit)).tolist():
        if i in verdicts:
            continue
        for name, text in (("src", src.lines[i]), ("tgt", tgt.lines[i])):
            why = _too_long(text, config)
            if why is not None:
                verdicts[i] = Verdict(TOO_LONG, f"{name} has {why}")
                break
    ws, wt, ratio = src.weighted, tgt.weighted, length_ratios(src, tgt)
    for i in np.flatnonzero(ratio > config.max_length_ratio).tolist():
        if i not in verdicts:
            verdicts[i] = Verdict(
                LENGTH_RATIO,
                f"{ws[i]:g} vs {wt[i]:g} weighted characters, ratio {ratio[i]:.1f} "
                f"(limit {config.max_length_ratio:g})",
            )
    if config.drop_copies:
        # Case folding leaves Han characters alone and makes none: a copy has as many on
        # each side, and an English-Chinese pair is rarely worth folding.
        maybe = np.flatnonzero(src.scripts[:, scripts.HAN] == tgt.scripts[:, scripts.HAN])
        # Equal letters and digits need as many letters of each script: only such pairs
        # are compared so (a Latin-script pair is otherwise compared char by char).
        alike = (src.scripts == tgt.scripts).all(axis=1)
        for i in maybe.tolist():
            if _same_text(src.lines[i], tgt.lines[i], bool(alike[i])):
                verdicts.setdefault(i, Verdict(COPY, "target is a copy of the source"))
    return verdicts


def _same_text(a: str, b: str, letters_alike: bool) -> bool:
    """Equal but for case, or, where they have as many letters of each script, in their
    letters and digits alone (a code copied with other spacing: `AB12 / 345` and
    `AB12/345`)."""
    a, b = a.casefold(), b.casefold()
    if a == b or not letters_alike:
        return a == b
    kept = ["".join(filter(str.isalnum, text)) for text in (a, b)]
    return bool(kept[0]) and kept[0] == kept[1]
