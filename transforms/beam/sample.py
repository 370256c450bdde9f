"""The Beam layer of the vocabulary sample: thin DoFns around `vocab/sample.py`, and the
graph (`SampleTrainText`): the chosen lines of the training split, per column."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apache_beam as beam

from nmtpipe.transforms.storage.read_meter import Meter, ReadCount
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
    """TrainShard → the chosen lines of each column, written to `folder`; each shard's
    bytes counted into `meter` once sampled."""

    def __init__(
        self,
        selector: IdSample | BudgetSample,
        columns: Sequence[str],
        folder: str,
        meter: Meter | None = None,
    ) -> None:
        self.selector = selector
        self.columns = tuple(columns)
        self.folder = folder
        self.read_count = ReadCount(meter)

    def process(self, shard: TrainShard, sizes: dict[str, int]) -> Iterator[tuple[str, int]]:
        yield from sample_shard(self.selector, shard, self.columns, self.folder, sizes)
        self.read_count.add(shard.size)

    def finish_bundle(self) -> None:
        self.read_count.publish()


class SampleTrainText(beam.PTransform):
    """From the pipeline's start: each train shard's chosen lines of `columns`, written
    as one text file per shard and column under `folder` (`vocab/sample.py` reads them
    back in order). T2T's byte budget needs each side's size first, summed over shards."""

    def __init__(
        self,
        shards: Sequence[TrainShard],
        selector: IdSample | BudgetSample,
        columns: Sequence[str],
        folder: str,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        self.shards, self.selector = list(shards), selector
        self.columns, self.folder, self.meter = list(columns), folder, meter

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        listed = pbegin | "ListShards" >> beam.Create(self.shards)
        if isinstance(self.selector, BudgetSample):
            sizes = (
                listed
                | "ShardBytes" >> beam.ParDo(ShardBytesFn(self.columns))
                | "SideBytes" >> beam.CombinePerKey(sum)
            )
        else:
            sizes = pbegin | "NoSizes" >> beam.Create([])
        return listed | "Sample" >> beam.ParDo(
            SampleShardFn(self.selector, self.columns, self.folder, self.meter),
            sizes=beam.pvalue.AsDict(sizes),
        )
