"""Deterministic ids, splits and shards."""

from __future__ import annotations

import numpy as np
import pytest

from nmtpipe.transforms.formats.shard_names import shard_name
from nmtpipe.transforms.text.split import SPLITS, Placer, SplitConfig

SHARDS = (("train", 4), ("valid", 2), ("test", 1))


def place(src, tgt, role="train", **config):
    config.setdefault("shards", SHARDS)
    return Placer(SplitConfig(**config)).place(list(src), list(tgt), role)


def test_placement_is_a_function_of_the_pair_only():
    src = [f"sentence {i}" for i in range(2000)]
    tgt = [f"句子 {i}" for i in range(2000)]
    whole = place(src, tgt)
    parts = [place(src[i : i + 7], tgt[i : i + 7]) for i in range(0, 2000, 7)]
    for field in ("ids", "splits", "shards"):
        assert np.array_equal(
            getattr(whole, field), np.concatenate([getattr(p, field) for p in parts])
        )
    assert len(set(whole.ids.tolist())) == 2000
    assert whole.ids.min() >= 0


def test_fractions_and_shard_ranges():
    n = 20000
    placed = place([f"s{i}" for i in range(n)], ["t"] * n, valid_fraction=0.1, test_fraction=0.05)
    share = np.bincount(placed.splits, minlength=3) / n
    assert abs(share[SPLITS.index("valid")] - 0.1) < 0.01
    assert abs(share[SPLITS.index("test")] - 0.05) < 0.01
    for split, count in SHARDS:
        shards = placed.shards[placed.splits == SPLITS.index(split)]
        assert set(shards.tolist()) == set(range(count))


def test_explicit_inputs_keep_their_split_and_only_carved_splits_are_drawn():
    placed = place(["a"] * 5, ["b"] * 5, role="valid")
    assert set(placed.splits.tolist()) == {SPLITS.index("valid")}
    only_valid = place([f"s{i}" for i in range(3000)], ["t"] * 3000, carve=("valid",))
    assert SPLITS.index("test") not in set(only_valid.splits.tolist())


def test_split_key_src_keeps_translations_of_a_sentence_together():
    src = [f"Can you help {i % 50}?" for i in range(1000)]
    tgt = [f"翻译 {i}" for i in range(1000)]
    placed = place(src, tgt, key="src", valid_fraction=0.2, test_fraction=0.2)
    split_of: dict[str, set[int]] = {}
    for s, split in zip(src, placed.splits.tolist(), strict=True):
        split_of.setdefault(s, set()).add(split)
    assert all(len(v) == 1 for v in split_of.values())


def test_seed_changes_the_draw():
    src = [f"s{i}" for i in range(500)]
    a, b = place(src, src, seed=0), place(src, src, seed=1)
    assert not np.array_equal(a.ids, b.ids)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"valid_fraction": 0.6, "test_fraction": 0.5},
        {"shards": (("train", 0),)},
        {"carve": ("valid",), "shards": (("train", 1),)},
    ],
)
def test_bad_configs(kwargs):
    with pytest.raises(ValueError):
        SplitConfig(**kwargs)


def test_shard_names():
    assert shard_name("train", 3, 8, ".parquet") == "train-00003-of-00008.parquet"
