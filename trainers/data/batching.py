"""Token-based batches of similar lengths, the same number on every rank, resumable.

As in fairseq's `batch_by_size`, a batch is limited by tokens, not sentences: its
sentence count times its longest length (source or target, rounded up to a multiple of
`pad_to` because that is the width it will be padded to) stays within `max_tokens`.
Pairs are ordered by that length — randomly among equal lengths — so batches hold
similar lengths; the batch order is then shuffled. Both orders depend only on the seed
and the epoch, so an epoch's batches can be rebuilt exactly when training resumes.
Pairs too long for any batch are left out and counted, never a crash.

Ranks take every `world`-th batch of the epoch; when the batch count does not divide,
the first batches are repeated at the end (like torch's `DistributedSampler`), so every
rank runs the same number of steps and DDP never waits on a rank that ran out.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


def padded(lengths: np.ndarray, multiple: int) -> np.ndarray:
    return -(-lengths // multiple) * multiple


@dataclass(frozen=True)
class EpochBatches:
    """One epoch's batches (arrays of pair indices), in training order, and what was left out."""

    batches: list[np.ndarray]
    skipped: int  # pairs longer than max_tokens allows
    repeated: int = 0  # batches repeated so that every rank has the same number

    def for_rank(self, rank: int, world: int) -> list[np.ndarray]:
        return self.batches[rank::world]


def greedy_cuts(widths: np.ndarray, max_tokens: int) -> list[int]:
    """Batch boundaries over non-decreasing `widths`: each batch as long as
    count x its last (widest) width <= max_tokens. A binary search per batch."""
    cuts, start, n = [0], 0, widths.size
    while start < n:
        lo, hi = start, n - 1  # the last index that still fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if (mid - start + 1) * int(widths[mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        start = lo + 1
        cuts.append(start)
    return cuts


def length_sorted_batches(
    lengths: np.ndarray, max_tokens: int, pad_to: int = 8
) -> list[np.ndarray]:
    """Positions of sentences of `lengths`, sorted by length and cut into batches of at
    most `max_tokens` padded tokens (what decoding searches together)."""
    order = np.argsort(lengths, kind="stable")
    cuts = greedy_cuts(padded(lengths[order], pad_to), max_tokens)
    return [order[a:b] for a, b in itertools.pairwise(cuts)]


def epoch_batches(
    src_sizes: np.ndarray,
    tgt_sizes: np.ndarray,
    max_tokens: int,
    seed: int,
    epoch: int,
    world: int = 1,
    pad_to: int = 8,
) -> EpochBatches:
    """The batches of one epoch for `world` ranks (see the module's description)."""
    if max_tokens < pad_to:
        raise ValueError(f"--max-tokens {max_tokens} is less than one padded token row")
    widths = padded(np.maximum(src_sizes, tgt_sizes).astype(np.int64), pad_to)
    keep = np.flatnonzero(widths <= max_tokens)
    rng = np.random.default_rng([seed, epoch])
    order = keep[rng.permutation(keep.size)]
    order = order[np.argsort(widths[order], kind="stable")]
    cuts = greedy_cuts(widths[order], max_tokens)
    batches = [order[a:b] for a, b in itertools.pairwise(cuts)]
    batches = [batches[i] for i in rng.permutation(len(batches))]
    repeated = (-len(batches)) % world if batches else 0
    batches += [batches[i % len(batches)] for i in range(repeated)]
    return EpochBatches(batches, skipped=int(widths.size - keep.size), repeated=repeated)
