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
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# T2T's alphanumeric set is "Unicode category L* or N*", built by looping over
# range(sys.maxunicode). Python defines str.isalnum() by the same categories, so regex
# `\w` without `_` is the same set, matched in C (tests/transforms/text/test_t2t_tokenizer.py
# checks every code point). It is far faster than an explicit class of ~700 ranges.
_RUNS = re.compile(r"[^\W_]+|[\W_]+")
_ALNUM = re.compile(r"[^\W_]")
_ALNUM_RUNS = re.compile(r"[^\W_]+")


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
def alnum_table() -> np.ndarray:
    """T2T's alphanumeric set as a lookup table over all code points.

    Built from the alphanumeric runs of one string of every code point (about 700
    runs, found in C) rather than a Python loop over 1.1M characters, which took longer
    than preparing a small corpus, in every process that tokenises.
    """
    every = np.arange(sys.maxunicode + 1, dtype="<u4").tobytes()
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for run in _ALNUM_RUNS.finditer(every.decode("utf-32-le", "surrogatepass")):
        table[run.start() : run.end()] = True
    return table


def token_array(lines: list[str]) -> pa.StringArray:
    """Every token T2T counts in `lines`, as one Arrow string array (ASCII lines' tokens
    first: for counting, where order does not matter).

    The same tokens as `encode(line)` for every line, computed on the code points of the
    `\n`-joined lines with numpy: line breaks and the single spaces between two
    alphanumeric characters (the " " tokens T2T drops) are deleted, and the remaining
    characters are cut where a token starts. The result is built straight from those
    buffers, without a Python string per token, so counting it (`pc.value_counts`) runs
    in C++. ASCII lines take one byte per character, the others four. Lines must be
    valid Unicode (no lone surrogates), as decoded UTF-8 always is.
    """
    arrays = [_tokens(text, ascii_only)[0] for _, text, ascii_only in ascii_groups(lines)]
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def line_tokens(lines: list[str]) -> tuple[pa.StringArray, np.ndarray]:
    """Every line's tokens as `encode` gives them, in line order, as one Arrow array
    (computed as `token_array` computes them), and how many tokens each line has."""
    n = len(lines)
    if n == 0 or any("\n" in line for line in lines):  # a line break inside a line
        tokens, owner = _slowly(lines)
        return tokens, np.bincount(owner, minlength=n)
    found = [(_tokens(text, ascii_only), rows) for rows, text, ascii_only in ascii_groups(lines)]
    owner = np.concatenate([rows[line] for (_, line), rows in found])
    tokens = pa.concat_arrays([tokens for (tokens, _), _ in found])
    if len(found) > 1:  # ASCII lines' tokens came first: back to line order
        tokens = tokens.take(pa.array(np.argsort(owner, kind="stable")))
    return tokens, np.bincount(owner, minlength=n)


def ascii_groups(lines: list[str]) -> Iterator[tuple[np.ndarray, str, bool]]:
    """The ASCII lines and the others apart, each group that has lines as (its rows,
    its lines `\n`-joined, whether ASCII): ASCII text is looked at one byte per
    character, not four."""
    is_ascii = np.fromiter(map(str.isascii, lines), dtype=bool, count=len(lines))
    for mask, ascii_only in ((is_ascii, True), (~is_ascii, False)):
        rows = np.flatnonzero(mask)
        if rows.size == len(lines):  # all of one kind (no lines: one empty ASCII text)
            yield rows, "\n".join(lines), ascii_only
            return
        if rows.size:
            yield rows, "\n".join([lines[i] for i in rows.tolist()]), ascii_only


def _slowly(lines: list[str]) -> tuple[pa.StringArray, np.ndarray]:
    """`encode` line by line: tokens and the line of each."""
    per_line = [encode(line) for line in lines]
    line = np.repeat(np.arange(len(lines)), [len(tokens) for tokens in per_line])
    return pa.array([t for tokens in per_line for t in tokens], pa.string()), line


def _tokens(text: str, ascii_only: bool) -> tuple[pa.StringArray, np.ndarray]:
    return joined_tokens(text, code_points(text, ascii_only))


def code_points(text: str, ascii_only: bool) -> np.ndarray:
    """The code points of `text`: uint8 if it is ASCII, else uint32."""
    if ascii_only:
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def joined_tokens(text: str, cps: np.ndarray) -> tuple[pa.StringArray, np.ndarray]:
    """The tokens of `\n`-joined lines `text`, whose `code_points` are `cps`, and the
    line of each.

    A token never holds a character T2T drops (a line break, a single space between two
    alphanumeric characters): the text is cut into runs around those and wherever
    alphanumeric-ness changes, and the runs that are not dropped characters are the
    tokens, taken straight from the text's UTF-8 bytes."""
    if "\x00" in text:
        return _slowly(text.split("\n"))
    if cps.size == 0:
        return pa.array([], pa.string()), np.zeros(0, dtype=np.int64)
    alnum = alnum_of(cps)
    breaks = cps == ord("\n")
    dropped = breaks.copy()
    dropped[1:-1] |= (cps[1:-1] == ord(" ")) & alnum[:-2] & alnum[2:]
    cut = np.empty(cps.size, dtype=bool)
    cut[0] = True
    cut[1:] = (alnum[1:] != alnum[:-1]) | dropped[1:] | dropped[:-1]
    pieces, first = runs(text, cps, cut)
    tokens = np.flatnonzero(~dropped[first])
    # A line break is a run of its own: a token's line is the number of them before it.
    line = np.cumsum(breaks[first])[tokens]
    return pieces.take(pa.array(tokens)), line


def alnum_of(cps: np.ndarray) -> np.ndarray:
    """Whether T2T counts each code point of `cps` as alphanumeric (ASCII text, uint8,
    by one `bytes.translate`)."""
    if cps.dtype == np.uint8:
        return np.frombuffer(cps.tobytes().translate(_ascii_alnum()), dtype=bool)
    return alnum_table()[cps]


@functools.cache
def _ascii_alnum() -> bytes:
    """`bytes.translate` table: 1 for T2T's alphanumeric ASCII characters, else 0."""
    return bytes(int(is_alnum(chr(b))) for b in range(256))


def runs(text: str, cps: np.ndarray, cut: np.ndarray) -> tuple[pa.StringArray, np.ndarray]:
    """`text` (code points `cps`, uint8 if ASCII) cut where `cut` is True (it must be
    at 0), as one Arrow array over the text's UTF-8 bytes with no Python string per
    run, and where each run starts, in characters."""
    first = np.flatnonzero(cut)
    if cps.dtype == np.uint8:
        data, offsets = cps, first
    else:
        # UTF-8 bytes per character beyond the first, to turn character positions
        # into byte offsets.
        extra = (cps >= 0x80).astype(np.uint8)
        extra += cps >= 0x800
        extra += cps >= 0x10000
        before = np.cumsum(extra, dtype=np.int64)
        before -= extra
        data, offsets = np.frombuffer(text.encode("utf-8"), dtype=np.uint8), before[first] + first
    bounds = np.append(offsets, data.size).astype(np.int32)
    return pa.StringArray.from_buffers(first.size, pa.py_buffer(bounds), pa.py_buffer(data)), first


def count_tokens(lines: list[str]) -> Counter[str]:
    """Token counts of `lines`, as T2T's `build_from_generator` counts them."""
    counted = pc.value_counts(token_array(lines))
    return Counter(
        dict(zip(counted.field(0).to_pylist(), counted.field(1).to_pylist(), strict=True))
    )
