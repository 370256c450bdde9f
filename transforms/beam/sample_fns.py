"""The Beam layer of the vocabulary sample: thin DoFns around `vocab/sample.py`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apache_beam as beam

from nmtpipe.transforms.vocab.sample import (
    BudgetSample,
    IdSample,
    TrainShard,
    sample_shard,
    shard_bytes,
)


class ShardBytesFn(beam.DoFn):
    """TrainShard → (column, bytes of its lines) for each column."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)

    def process(self, shard: TrainShard) -> Iterator[tuple[str, int]]:
        yield from shard_bytes(shard, self.columns)


class SampleShardFn(beam.DoFn):
    """TrainShard → the chosen lines of each column, written to `folder`."""

    def __init__(
        self, selector: IdSample | BudgetSample, columns: Sequence[str], folder: str
    ) -> None:
        self.selector = selector
        self.columns = tuple(columns)
        self.folder = folder

    def process(self, shard: TrainShard, sizes: dict[str, int]) -> Iterator[tuple[str, int]]:
        yield from sample_shard(self.selector, shard, self.columns, self.folder, sizes)
