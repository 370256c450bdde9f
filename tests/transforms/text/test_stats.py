"""Mergeable statistics and their summary."""

from __future__ import annotations

import numpy as np

from nmtpipe.transforms.text.filters import REASONS
from nmtpipe.transforms.text.stats import (
    finalize,
    histogram,
    merge_into,
    side_partial,
    summarize_lengths,
)


def test_partials_merge_in_any_grouping():
    a = {
        "pairs_read": 3,
        "rejects": {"empty": 1},
        "splits": {"train": side_partial(np.array([1, 2]))},
    }
    b = {"pairs_read": 2, "rejects": {"empty": 1, "copy": 1}}
    c = {"splits": {"train": side_partial(np.array([2]))}}
    left = merge_into(merge_into({}, a), merge_into(merge_into({}, b), c))
    right = merge_into(merge_into(merge_into({}, c), b), a)
    assert left == right
    assert left["splits"]["train"] == {"chars": 5, "char_hist": {1: 1, 2: 2}}


def test_percentiles_from_a_histogram():
    lengths = np.array([1] * 50 + [10] * 40 + [100] * 10)
    summary = summarize_lengths(histogram(lengths))
    assert summary == {"mean": 14.5, "p50": 1, "p90": 10, "p95": 100, "p99": 100, "max": 100}
    assert summarize_lengths({"3": 1}) == {
        "mean": 3.0,
        "p50": 3,
        "p90": 3,
        "p95": 3,
        "p99": 3,
        "max": 3,
    }


def test_finalize_lists_every_reason_and_split():
    partial = {
        "pairs_read": 10,
        "rejects": {"duplicate": 2},
        "splits": {"train": {"pairs": 8, "src": {"chars": 40, "char_hist": {5: 8}, "tokens": 16}}},
    }
    stats = finalize(partial, ("train", "test"))
    assert stats["rejects"] == {r: (2 if r == "duplicate" else 0) for r in REASONS}
    assert (stats["pairs_read"], stats["pairs_kept"], stats["pairs_rejected"]) == (10, 8, 2)
    assert stats["splits"] == {"train": 8, "test": 0}
    assert stats["split_details"]["train"]["src"]["tokens"] == 16
    assert "tokens" not in stats["split_details"]["test"]["src"]
