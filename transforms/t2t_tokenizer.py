"""Tensor2Tensor's tokenizer (`data_generators/tokenizer.py`), as fast regular expressions.

T2T calls a character alphanumeric when its Unicode category starts with L or N, cuts
the text wherever that property changes, and drops each single space that sits between
two tokens (decoding puts it back between alphanumeric tokens). T2T does this with a
Python loop over characters; here one compiled pattern does the cutting in C, with the
same character set, so both agree for every string on the same interpreter.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections import Counter

import numpy as np

# T2T's alphanumeric set is "Unicode category L* or N*", built by looping over
# range(sys.maxunicode). Python defines str.isalnum() by the same categories, so regex
# `\w` without `_` is the same set, matched in C (tests/transforms/test_t2t_tokenizer.py
# checks every code point). It is far faster than an explicit class of ~700 ranges.
_RUNS = re.compile(r"[^\W_]+|[\W_]+")
_ALNUM = re.compile(r"[^\W_]")


def is_alnum(char: str) -> bool:
    """Whether T2T counts `char` as alphanumeric."""
    return _ALNUM.match(char) is not None


def encode(text: str) -> list[str]:
    """Split `text` into tokens exactly as T2T's `tokenizer.encode` does."""
    runs = _RUNS.findall(text)
    if len(runs) <= 2:
        return runs
    # T2T keeps a " " token only as the first token (and always the last one).
    middle = [tok for tok in runs[1:-1] if tok != " "]
    return [runs[0], *middle, runs[-1]]


def decode(tokens: list[str]) -> str:
    """Join tokens as T2T's `tokenizer.decode` does: a space between alphanumeric tokens."""
    out: list[str] = []
    prev_alnum = False
    for i, tok in enumerate(tokens):
        alnum = is_alnum(tok[0])
        if i > 0 and prev_alnum and alnum:
            out.append(" ")
        out.append(tok)
        prev_alnum = alnum
    return "".join(out)


@functools.cache
def _alnum_table() -> np.ndarray:
    """T2T's alphanumeric set as a lookup table over all code points."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for cp in range(sys.maxunicode):  # T2T's range, which leaves out sys.maxunicode
        if unicodedata.category(chr(cp))[0] in "LN":
            table[cp] = True
    return table


def count_tokens(lines: list[str], counts: Counter[str] | None = None) -> Counter[str]:
    """Token counts of `lines`, as T2T's `build_from_generator` counts them.

    Adds to `counts` when given (in C, without a Python loop over existing entries) and
    returns it.

    The same as `counts.update(encode(line))` for every line, computed on the code
    points of the whole `\n`-joined batch with numpy: line breaks and the single spaces
    between two alphanumeric characters (the " " tokens T2T drops) are deleted, a NUL
    goes in front of every other character that starts a token, and splitting on NUL
    gives the tokens. Per token, only the split and the Counter run in Python.
    """
    counts = Counter() if counts is None else counts
    ascii_lines = [line for line in lines if line.isascii()]
    if len(ascii_lines) == len(lines):
        _count_joined("\n".join(lines), counts, "ascii", np.uint8)
    else:
        # One byte per character for ASCII lines, four for the others.
        _count_joined("\n".join(ascii_lines), counts, "ascii", np.uint8)
        other = "\n".join(line for line in lines if not line.isascii())
        _count_joined(other, counts, "utf-32-le", np.uint32)
    return counts


def _count_joined(text: str, counts: Counter[str], codec: str, dtype: type) -> None:
    if "\x00" in text:  # cannot serve as the marker; rare enough to go line by line
        for line in text.split("\n"):
            counts.update(encode(line))
        return
    cps = np.frombuffer(text.encode(codec, "surrogatepass"), dtype=dtype)
    if cps.size == 0:
        return
    alnum = _alnum_table()[cps]
    dropped = cps == ord("\n")
    between = np.zeros_like(dropped)
    between[1:-1] = alnum[:-2] & alnum[2:]
    dropped |= (cps == ord(" ")) & between
    starts = np.zeros_like(dropped)
    starts[1:] = (alnum[1:] != alnum[:-1]) | dropped[:-1]
    kept = ~dropped
    chars, starts = cps[kept], starts[kept]
    if chars.size == 0:
        return
    starts[0] = False
    shift = np.cumsum(starts, dtype=np.int32)
    marked = np.zeros(chars.size + int(shift[-1]), dtype=dtype)
    marked[np.arange(chars.size, dtype=np.int32) + shift] = chars
    counts.update(marked.tobytes().decode(codec, "surrogatepass").split("\x00"))
