"""The vocabulary-sample graph alone on a real runner: the chosen lines, shard by shard."""

from __future__ import annotations

import pyarrow as pa
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.sample import SampleTrainText
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.vocab.sample import (
    ID_RANGE,
    BudgetSample,
    IdSample,
    TrainShard,
    sample_lines,
)
from tests.helpers import IN_MEMORY


def shards(tmp_path) -> list[TrainShard]:
    """Two train shards of four pairs each; ids spread over the id range."""
    found = []
    for k in range(2):
        ids = [(4 * k + i) * (ID_RANGE // 8) for i in range(4)]
        url = str(tmp_path / f"train-{k}.parquet")
        src = [f"s{4 * k + i}" for i in range(4)]
        tgt = [f"t{4 * k + i}" for i in range(4)]
        fsio.write_parquet(url, pa.table({"id": ids, "src": src, "tgt": tgt}))
        found.append(TrainShard(k, url, 4 * k))
    return found


def test_an_id_sample_takes_the_pairs_below_the_threshold(tmp_path):
    folder = str(tmp_path / "sample")
    with TestPipeline(argv=IN_MEMORY) as p:
        counts = p | SampleTrainText(shards(tmp_path), IdSample(0.5), ["src", "tgt"], folder)
        assert_that(counts, equal_to([("src", 4), ("tgt", 4), ("src", 0), ("tgt", 0)]))
    assert list(sample_lines(folder, "src", 2)) == ["s0", "s1", "s2", "s3"]


def test_a_byte_budget_sample_sizes_the_side_first(tmp_path):
    folder = str(tmp_path / "sample")
    # 8 lines of 3 bytes (with the newline): countermax = int(24 / 6 / 2) = 2, so T2T
    # skips 2 lines, takes one, and again: lines 2 and 5 of the side's whole text.
    with TestPipeline(argv=IN_MEMORY) as p:
        counts = p | SampleTrainText(shards(tmp_path), BudgetSample(6.0), ["src"], folder)
        assert_that(counts, equal_to([("src", 1), ("src", 1)]))
    assert list(sample_lines(folder, "src", 2)) == ["s2", "s5"]
