"""The vocabulary-sample graph: the chosen lines of the training split, per column."""

from __future__ import annotations

from collections.abc import Sequence

import apache_beam as beam

from nmtpipe.transforms.beam.sample_fns import SampleShardFn, ShardBytesFn
from nmtpipe.transforms.vocab.sample import BudgetSample, IdSample, TrainShard


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
    ) -> None:
        super().__init__()
        self.shards, self.selector = list(shards), selector
        self.columns, self.folder = list(columns), folder

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
            SampleShardFn(self.selector, self.columns, self.folder),
            sizes=beam.pvalue.AsDict(sizes),
        )
