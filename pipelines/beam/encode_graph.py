"""The `encode` graph: prepared row groups → Arrow and fairseq shards, and a summary."""

from __future__ import annotations

import apache_beam as beam

from nmtpipe.pipelines.beam.summary import WriteSummary
from nmtpipe.transforms.beam.encode_fns import EncodePartFn
from nmtpipe.transforms.formats.encode_part import EncodeSpec, EncodeTask


class EncodeShards(beam.PTransform):
    """From the pipeline's start: encode every part (`EncodeTask`), one task each, spread
    over the workers; its only driver-visible result is the summary file at
    `summary_url` (the files written, token statistics)."""

    def __init__(self, spec: EncodeSpec, tasks: list[EncodeTask], summary_url: str) -> None:
        super().__init__()
        self.spec, self.tasks, self.summary_url = spec, tasks, summary_url

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "ListShards" >> beam.Create(self.tasks)
            | "Redistribute" >> beam.Reshuffle()
            | "Encode" >> beam.ParDo(EncodePartFn(self.spec))
            | "Summarize" >> WriteSummary(self.summary_url)
        )
