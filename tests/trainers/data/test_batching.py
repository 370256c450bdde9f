"""Token-based batches: within budget, similar lengths, deterministic, equal per rank."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.trainers.data.batching import epoch_batches, padded


def sizes(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 60, n).astype(np.int32), rng.integers(1, 60, n).astype(np.int32)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 400),
    max_tokens=st.integers(8, 600),
    world=st.integers(1, 4),
    seed=st.integers(0, 3),
)
def test_every_pair_once_within_budget_and_ranks_equal(n, max_tokens, world, seed):
    src, tgt = sizes(n, seed)
    epoch = epoch_batches(src, tgt, max_tokens, seed=seed, epoch=1, world=world)
    widths = padded(np.maximum(src, tgt), 8)
    for batch in epoch.batches:
        assert batch.size >= 1 and batch.size * widths[batch].max() <= max_tokens
    distinct = epoch.batches[: len(epoch.batches) - epoch.repeated]
    seen = np.concatenate(distinct) if distinct else np.zeros(0, np.int64)
    assert sorted(seen.tolist()) == np.flatnonzero(widths <= max_tokens).tolist()
    assert epoch.skipped == int((widths > max_tokens).sum())
    counts = {len(epoch.for_rank(r, world)) for r in range(world)}
    assert len(counts) == 1 and epoch.repeated < world


def test_batches_hold_similar_lengths_and_fill_the_budget():
    src, tgt = sizes(20_000)
    epoch = epoch_batches(src, tgt, 4096, seed=0, epoch=1)
    widths = padded(np.maximum(src, tgt), 8)
    spread = [int(widths[b].max() - widths[b].min()) for b in epoch.batches]
    assert np.mean(spread) < 2  # almost every batch has one padded width
    used = sum(b.size * widths[b].max() for b in epoch.batches) / (4096 * len(epoch.batches))
    assert used > 0.9


def test_order_depends_only_on_seed_and_epoch():
    src, tgt = sizes(3000)
    a = epoch_batches(src, tgt, 1024, seed=7, epoch=3)
    b = epoch_batches(src, tgt, 1024, seed=7, epoch=3)
    c = epoch_batches(src, tgt, 1024, seed=7, epoch=4)
    assert all(np.array_equal(x, y) for x, y in zip(a.batches, b.batches, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a.batches, c.batches, strict=False))


def test_too_long_pairs_are_skipped_and_counted():
    epoch = epoch_batches(np.array([3, 200, 5]), np.array([4, 2, 300]), 64, seed=0, epoch=1)
    assert epoch.skipped == 2 and np.concatenate(epoch.batches).tolist() == [0]
    with pytest.raises(ValueError, match="--max-tokens 4 is less than one padded token row"):
        epoch_batches(np.array([1]), np.array([1]), 4, seed=0, epoch=1)
