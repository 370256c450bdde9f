"""The Beam layer of `encode`: a thin DoFn around `formats/encode_part.py`, and the
graph (`EncodeShards`): prepared row groups → Arrow and fairseq shards, and a summary."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from nmtpipe.transforms.beam.summary import FILE, STATS, WriteSummary
from nmtpipe.transforms.formats.encode_part import (
    EncodeSpec,
    EncodeTask,
    encode_part,
    load_encoders,
)
from nmtpipe.transforms.storage.read_meter import Meter, ReadCount
from nmtpipe.transforms.vocab.kinds.base import SideEncoder


class EncodePartFn(beam.DoFn):
    """Encodes one part (`EncodeTask`); emits ("file", entry)... and one ("stats", partial).

    The vocabulary is loaded once per worker, in `setup`; each part's bytes are counted
    into `meter` once encoded."""

    def __init__(self, spec: EncodeSpec, meter: Meter | None = None) -> None:
        self.spec = spec
        self.read_count = ReadCount(meter)
        self._encoders: dict[str, SideEncoder] = {}

    def setup(self) -> None:
        self._encoders = load_encoders(self.spec)

    def process(self, task: EncodeTask) -> Iterator[tuple[str, Any]]:
        entries, stats = encode_part(self.spec, self._encoders, task)
        self.read_count.add(task.size)
        for entry in entries:
            yield FILE, entry
        yield STATS, stats

    def finish_bundle(self) -> None:
        self.read_count.publish()


class EncodeShards(beam.PTransform):
    """From the pipeline's start: encode every part (`EncodeTask`), one task each, spread
    over the workers; its only driver-visible result is the summary file at
    `summary_url` (the files written, token statistics)."""

    def __init__(
        self,
        spec: EncodeSpec,
        tasks: list[EncodeTask],
        summary_url: str,
        meter: Meter | None = None,
    ) -> None:
        super().__init__()
        self.spec, self.tasks, self.summary_url, self.meter = spec, tasks, summary_url, meter

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "ListShards" >> beam.Create(self.tasks)
            | "Redistribute" >> beam.Reshuffle()
            | "Encode" >> beam.ParDo(EncodePartFn(self.spec, self.meter))
            | "Summarize" >> WriteSummary(self.summary_url)
        )
