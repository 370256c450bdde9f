"""Samples of the training split: T2T's byte-budget sampling, checked against T2T."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.vocab.sample import (
    BudgetSample,
    IdSample,
    TrainShard,
    read_budget_sample,
    side_bytes,
)
from tests.helpers import DATA, golden_counts

GOLDEN = DATA / "golden"


@pytest.mark.parametrize("budget", [2000, 20000])
@pytest.mark.parametrize("shard_rows", [3012, 1000, 7])
def test_budget_sample_is_generate_lines_for_vocab(budget, shard_rows):
    # tricky.txt as one side's train text, cut into shards: the sample and its counts
    # must be what T2T's generate_lines_for_vocab takes from the whole file.
    lines = (GOLDEN / "tricky.txt").read_text(encoding="utf-8").split("\n")[:-1]
    size = side_bytes(pa.chunked_array([pa.array(lines)]))
    assert size == (GOLDEN / "tricky.txt").stat().st_size
    selector = BudgetSample(budget)
    chosen = []
    for k, first in enumerate(range(0, len(lines), shard_rows)):
        table = pa.table({"src": lines[first : first + shard_rows]})
        mask = selector.mask(table, TrainShard(k, "", first), "src", {"src": size})
        chosen += table["src"].filter(pa.array(mask)).to_pylist()
    sample = read_budget_sample(iter(chosen), budget)
    expected = golden_counts(f"t2t-counts-tricky-budget{budget}.tsv.gz")
    assert t2t_tokenizer.count_tokens(sample) == expected


def test_id_sample_takes_the_ids_below_the_threshold():
    ids = np.array([0, 1 << 61, 1 << 62, (1 << 63) - 1], dtype=np.int64)
    table = pa.table({"id": ids})
    assert IdSample(0.5).mask(table, TrainShard(0, "", 0), "src", {}).tolist() == [
        True,
        True,
        False,
        False,
    ]
    assert IdSample(1.0).mask(table, TrainShard(0, "", 0), "src", {}).all()


def test_budget_cut_off():
    assert read_budget_sample(iter(["abc", "de", "f"]), 4) == ["abc", "de"]
    assert read_budget_sample(iter(["abc"]), 0) == []
