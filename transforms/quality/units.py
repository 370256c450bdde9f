"""The units pair scores count: a line as lowercased words, each Han or kana character a
unit of its own (Chinese and Japanese write no spaces, and a character is the unit a
dictionary learned from a few thousand pairs can still count), digits left to the rules.

A chunk's lines become one ragged array of 64-bit unit ids (`Ragged`): ids are stable
hashes of a unit's code points, so counts from any worker, in any order, add up to the
same table. Lines are split by a compiled loop over their code points (numba): the
learned scorers split every pair once per pass, and Python's `re.findall` with a list
of strings per line cost about a fifth of `prepare`'s CPU with the lexical score on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

# Han and kana: each character a unit of its own.
_CJK = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
# Code point classes: what ends a run, a letter of a run, a unit alone.
_BREAK, _LETTER, _ALONE = 0, 1, 2


@dataclass(frozen=True)
class Ragged:
    """Per-line sequences in one flat array: line i's values are
    `values[starts[i]:starts[i + 1]]` (`starts` has one more entry than lines)."""

    values: np.ndarray
    starts: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    @property
    def owner(self) -> np.ndarray:
        """The line of each value."""
        return np.repeat(np.arange(len(self.starts) - 1), self.lengths)

    def take(self, rows: np.ndarray) -> Ragged:
        """The lines `rows`, in that order."""
        lengths = self.lengths[rows]
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        index = np.repeat(self.starts[:-1][rows] - starts[:-1], lengths) + np.arange(starts[-1])
        return Ragged(self.values[index], starts)


def code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' code points end to end, and where each text starts (one more)."""
    codes = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    return codes, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def distinct_code_points(codes: np.ndarray) -> np.ndarray:
    """The code points `codes` holds, sorted."""
    return np.flatnonzero(np.bincount(codes, minlength=1))


def of_each(codes: np.ndarray, distinct: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each code point's value, given a value per distinct code point (a table indexed by
    code point: one read each)."""
    table = np.zeros(int(distinct[-1]) + 1 if distinct.size else 1, dtype=values.dtype)
    table[distinct] = values
    return table[codes]


def of_lists(lists: list[list[str]]) -> Ragged:
    """Lines as lists of strings → their stable 64-bit ids (as `word_units` gives them)."""
    lengths = np.fromiter((len(items) for items in lists), dtype=np.int64, count=len(lists))
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    codes, bounds = code_points([item for items in lists for item in items])
    return Ragged(hash_spans(codes, bounds), starts)


def distinct(units: Ragged) -> Ragged:
    """Each line's units without repeats (sorted)."""
    return Ragged(*_distinct(units.values, units.starts.astype(np.int64)))


@njit(cache=True)
def _distinct(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out = np.empty_like(values)
    out_starts = np.empty_like(starts)
    n = 0
    for line in range(starts.size - 1):
        out_starts[line] = n
        for value in np.sort(values[starts[line] : starts[line + 1]]):
            if n == out_starts[line] or out[n - 1] != value:
                out[n] = value
                n += 1
    out_starts[starts.size - 1] = n
    return out[:n].copy(), out_starts


def word_units(lines: list[str]) -> Ragged:
    """Each line's units (see the module), as ids: its lowercased text in runs of
    letters (what Python's `[^\\W\\d_]` matches: digits, marks and the underscore
    end a run) and single Han and kana characters."""
    codes, bounds = code_points([line.lower() for line in lines])
    return Ragged(*_split_units(codes, _classes(codes), bounds))


def _classes(codes: np.ndarray) -> np.ndarray:
    """Each code point's class, each distinct code point asked once, as `re` asks it: a
    letter is alphanumeric and not a decimal digit; Han and kana stand alone."""
    distinct = distinct_code_points(codes)
    classes = np.array([_class(c) for c in distinct.tolist()], dtype=np.uint8)
    return of_each(codes, distinct, classes)


def _class(code: int) -> int:
    if any(first <= code <= last for first, last in _CJK):
        return _ALONE
    char = chr(code)
    return _LETTER if char.isalnum() and not char.isdecimal() and char != "_" else _BREAK


@njit(cache=True)
def _hash(codes: np.ndarray, first: int, last: int) -> np.uint64:
    """FNV-1a over code points first..last-1, then splitmix64's finaliser."""
    h = np.uint64(0xCBF29CE484222325)
    for k in range(first, last):
        h = (h ^ np.uint64(codes[k])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@njit(cache=True)
def hash_spans(codes: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """A stable 64-bit hash of each span bounds[i]..bounds[i + 1] of `codes`."""
    out = np.empty(bounds.size - 1, dtype=np.uint64)
    for i in range(bounds.size - 1):
        out[i] = _hash(codes, bounds[i], bounds[i + 1])
    return out


@njit(cache=True)
def _split_units(
    codes: np.ndarray, classes: np.ndarray, bounds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    values = np.empty(codes.size, dtype=np.uint64)
    starts = np.empty(bounds.size, dtype=np.int64)
    n = 0
    for line in range(bounds.size - 1):
        starts[line] = n
        run = -1  # where the current run of letters began
        for k in range(bounds[line], bounds[line + 1]):
            kind = classes[k]
            if kind != _LETTER and run >= 0:
                values[n] = _hash(codes, run, k)
                n += 1
                run = -1
            if kind == _ALONE:
                values[n] = _hash(codes, k, k + 1)
                n += 1
            elif kind == _LETTER and run < 0:
                run = k
        if run >= 0:
            values[n] = _hash(codes, run, bounds[line + 1])
            n += 1
    starts[bounds.size - 1] = n
    return values[:n].copy(), starts


# Marks around each line's characters, past the last code point so no text holds them.
START, END = 0x110000, 0x110001


def characters(lines: list[str]) -> Ragged:
    """Each line's characters as code points (spaces left out), between START and END:
    what a character model of the side counts."""
    bare = [line.replace(" ", "") for line in lines]
    codes = np.frombuffer("".join(bare).encode("utf-32-le"), dtype=np.uint32)
    lengths = np.fromiter(map(len, bare), dtype=np.int64, count=len(bare)) + 2
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.empty(int(starts[-1]), dtype=np.uint64)
    marks = np.zeros(values.size, dtype=bool)
    marks[starts[:-1]] = marks[starts[1:] - 1] = True
    values[starts[:-1]], values[starts[1:] - 1] = START, END
    values[~marks] = codes
    return Ragged(values, starts)
