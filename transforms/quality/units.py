"""The units pair scores count: a line as lowercased words, each Han or kana character a
unit of its own (Chinese and Japanese write no spaces, and a character is the unit a
dictionary learned from a few thousand pairs can still count), digits left to the rules.

A chunk's lines become one ragged array of 64-bit unit ids (`Ragged`): ids are stable
hashes, so counts from any worker, in any order, add up to the same table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.text.string_hash import hash64

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A CJK character alone, or a run of other letters (digits and marks break runs).
_UNIT = re.compile(rf"[{_CJK}]|[^\W\d_{_CJK}]+")


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


def of_lists(lists: list[list[str]]) -> Ragged:
    """Lines as lists of strings → their stable 64-bit ids."""
    lengths = np.fromiter((len(items) for items in lists), dtype=np.int64, count=len(lists))
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = pa.array([item for items in lists for item in items], pa.string())
    return Ragged(hash64(flat), starts)


def distinct(units: Ragged) -> Ragged:
    """Each line's units without repeats (sorted)."""
    owner = units.owner
    order = np.lexsort((units.values, owner))
    values, owner = units.values[order], owner[order]
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = (values[1:] != values[:-1]) | (owner[1:] != owner[:-1])
    lengths = np.bincount(owner[keep], minlength=len(units.starts) - 1)
    return Ragged(values[keep], np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))


def word_units(lines: list[str]) -> Ragged:
    """Each line's units (see the module), as ids."""
    return of_lists([_UNIT.findall(line.lower()) for line in lines])


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
