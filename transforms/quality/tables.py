"""Counts in tables of a fixed size: what scorers learn from a corpus, in memory that
does not grow with it.

A key (a unit's id, or a pair of them) lands in one of 2**bits cells by a stable hash;
keys that share a cell add up there (a few per cell for the rarest, where each count is
small: the scores skip units seen too rarely to judge). Counts are integers, expected
counts fixed-point in units of 1/SCALE, so that partial tables from any workers, merged
in any order, are the same table to the bit: scores, and the files that hold them, are
the same on every runner.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nmtpipe.transforms.text.string_hash import mix64

SCALE = 1 << 16  # fixed point of expected counts
PAIR = np.uint64(0x9E3779B97F4A7C15)


def pair_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One key per (a, b) of two uint64 key arrays, order mattering."""
    with np.errstate(over="ignore"):
        return mix64(a * PAIR) ^ b


@dataclass
class CountTable:
    """int64 counts in 2**bits cells, by key."""

    counts: np.ndarray

    @classmethod
    def empty(cls, bits: int) -> CountTable:
        return cls(np.zeros(1 << bits, dtype=np.int64))

    @property
    def shift(self) -> int:
        """How far right a key's hash is shifted to give its cell."""
        return 64 - (int(self.counts.size).bit_length() - 1)

    def cells(self, keys: np.ndarray) -> np.ndarray:
        shifted = mix64(keys.astype(np.uint64, copy=True)) >> np.uint64(self.shift)
        return shifted.astype(np.int64)

    def add(self, keys: np.ndarray, amounts: np.ndarray | int = 1) -> None:
        """Add `amounts` (integers; one, or one per key) at `keys`. In place, cell by cell:
        a batch touches few of the cells, and a count of every cell per batch (bincount)
        cost milliseconds a call where this costs microseconds."""
        if keys.size == 0:
            return
        if not np.isscalar(amounts):
            amounts = np.asarray(amounts, dtype=np.int64)
        np.add.at(self.counts, self.cells(keys), amounts)

    def get(self, keys: np.ndarray) -> np.ndarray:
        return self.counts[self.cells(keys)]

    def merge(self, other: CountTable) -> CountTable:
        self.counts += other.counts
        return self
