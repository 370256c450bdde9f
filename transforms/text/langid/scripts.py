"""Letters per writing system, counted per line for a whole batch of lines at once.

Script evidence is what a language model cannot be trusted with on short lines and
what is nearly free to compute: kana never occur in Chinese, Hangul never in Japanese,
and a Chinese line written in Latin letters is not Chinese. Every code point of the
basic plane is classified once into a lookup table (letters by script; digits,
punctuation and symbols count as nothing); a batch is one UTF-32 decode, one table
look-up and one `bincount`, with no Python work per line.

Cantonese gets a class of its own: the characters written colloquial Cantonese uses
where standard written Chinese never does (嘅, 咗, 喺, 佢, ...). They count as Han too.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable

import numpy as np

from nmtpipe.transforms.text import t2t_tokenizer

# Columns of the count matrix.
LATIN, HAN, KANA, HANGUL, CYRILLIC, OTHER, CANTONESE = range(7)
NAMES = ("Latin", "Han", "kana", "Hangul", "Cyrillic", "other", "Cantonese")
_COLUMNS = len(NAMES)

# How much text a letter of each script carries, in Latin letters: a Han character is
# about a word, a Hangul syllable half of one, a kana a syllable. On NTREX-128's 1,997
# en-zh pairs this makes the two sides' mean lengths agree within 11% (raw characters:
# English 3x Chinese).
WEIGHTS = {HAN: 3.0, HANGUL: 2.0, KANA: 1.5}

# Characters of written colloquial Cantonese that Mandarin text does not use. 唔 alone
# is not enough (泰唔士河, the Thames), so a line needs several (`identifier.py`).
CANTONESE_CHARS = "嘅咗喺佢冇唔啲嘢嚟哋乜嗰咩噉睇嘞囉㗎𠮶"

_RANGES = (
    (HAN, 0x3400, 0x4DBF),
    (HAN, 0x4E00, 0x9FFF),
    (HAN, 0xF900, 0xFAFF),
    (HAN, 0x3005, 0x3007),  # 々 〆 〇
    (KANA, 0x3041, 0x309F),
    (KANA, 0x30A1, 0x30FA),  # not U+30FB, the middle dot Chinese names use too
    (KANA, 0x30FC, 0x30FF),
    (KANA, 0x31F0, 0x31FF),
    (KANA, 0xFF66, 0xFF9D),
    (HANGUL, 0x1100, 0x11FF),
    (HANGUL, 0x3131, 0x318E),
    (HANGUL, 0xA960, 0xA97F),
    (HANGUL, 0xAC00, 0xD7FF),
    (HANGUL, 0xFFA0, 0xFFDC),
    (CYRILLIC, 0x0400, 0x052F),
)
# Supplementary ideographs (extensions B and later) are the only letters counted above
# the basic plane.
_ASTRAL_HAN = (0x20000, 0x323AF)


@functools.cache
def _table() -> np.ndarray:
    """The script class of each basic-plane code point; -1 for non-letters."""
    table = np.full(0x10000, -1, dtype=np.int8)
    for cp in range(0x10000):
        if unicodedata.category(chr(cp)).startswith("L"):
            name = unicodedata.name(chr(cp), "")
            table[cp] = LATIN if "LATIN" in name else OTHER
    for cls, lo, hi in _RANGES:
        table[lo : hi + 1] = np.where(table[lo : hi + 1] >= 0, cls, -1)
    table[0x3005:0x3008] = HAN  # 〆 and 〇 are not category L, but they are written as Han
    for char in CANTONESE_CHARS:
        if ord(char) < 0x10000:
            table[ord(char)] = CANTONESE
    return table


@functools.cache
def _not_ascii_letters() -> bytes:
    """Every byte but the ASCII letters and the line break: what `bytes.translate`
    deletes to leave each line's letters."""
    return bytes(b for b in range(256) if not (chr(b).isascii() and chr(b).isalpha()) and b != 0x0A)


def count_codes(cps: np.ndarray, n: int) -> np.ndarray:
    """Letters per script of the `n` `\n`-joined lines whose code points are `cps`
    (uint8: ASCII text, where no script but Latin can occur), as `count` gives them."""
    out = np.zeros((n, _COLUMNS), dtype=np.int64)
    if cps.dtype == np.uint8:
        letters = np.frombuffer(cps.tobytes().translate(None, _not_ascii_letters()), np.uint8)
        ends = np.append(np.flatnonzero(letters == 0x0A), letters.size)
        out[:, LATIN] = np.diff(ends, prepend=-1) - 1
        return out
    newline = cps == 0x0A
    line = np.cumsum(newline) - newline  # a newline belongs to the line it ends
    cls = np.where(cps < 0x10000, _table()[np.minimum(cps, 0xFFFF)], -1)
    astral = cps > 0xFFFF
    if astral.any():
        cls[astral & (cps >= _ASTRAL_HAN[0]) & (cps <= _ASTRAL_HAN[1])] = HAN
        cls[cps == ord("𠮶")] = CANTONESE
    keep = cls >= 0
    flat = line[keep] * _COLUMNS + cls[keep]
    out[:] = np.bincount(flat, minlength=n * _COLUMNS).reshape(n, _COLUMNS)
    out[:, HAN] += out[:, CANTONESE]
    return out


def count(lines: list[str]) -> np.ndarray:
    """Letters per script of each line: an (n, 7) int32 array, columns as named above.

    The Han column includes the Cantonese characters; lines must not contain `\n`.
    ASCII lines (most lines of a Latin-script side) take one byte per character.
    """

    def per_text(text: str, n: int) -> np.ndarray:
        return count_codes(t2t_tokenizer.code_points(text, text.isascii()), n)

    return ascii_apart(lines, _COLUMNS, per_text)


def ascii_apart(
    lines: list[str], columns: int, per_text: Callable[[str, int], np.ndarray]
) -> np.ndarray:
    """`per_text(text, n)` (an (n, columns) array for the `n` lines of `\n`-joined
    `text`) over the ASCII lines and over the others apart, rows back in line order: a
    text that is all ASCII is looked at one byte per character, not four."""
    n = len(lines)
    out = np.zeros((n, columns), dtype=np.int32)
    if n == 0:
        return out
    is_ascii = np.fromiter(map(str.isascii, lines), dtype=bool, count=n)
    for mask in (is_ascii, ~is_ascii):
        rows = np.flatnonzero(mask)
        if rows.size == n:
            out[:] = per_text("\n".join(lines), n)
        elif rows.size:
            out[rows] = per_text("\n".join([lines[i] for i in rows.tolist()]), rows.size)
    return out


def weighted_lengths(lengths: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Lengths of lines (`lengths`: characters) in Latin-letter equivalents: the letters
    of the scripts in WEIGHTS counted at their weight (`counts` from `count`)."""
    weighted = lengths.astype(np.float64)
    for script, weight in WEIGHTS.items():
        weighted += (weight - 1) * counts[:, script]
    return weighted
