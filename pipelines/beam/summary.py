"""`WriteSummary`: the one file a step's pipeline leaves for its driver."""

from __future__ import annotations

import json
from typing import Any

import apache_beam as beam

from nmtpipe.transforms.beam.summary_fns import SummaryFn
from nmtpipe.transforms.storage import fsio


def _write(summary: dict[str, Any], url: str) -> None:
    fsio.write_bytes(url, json.dumps(summary).encode())


class WriteSummary(beam.PTransform):
    """Tagged ("file" | "stats", value) elements → one summary file at `url`."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def expand(self, tagged: beam.PCollection) -> beam.PCollection:
        return (
            tagged
            | "Combine" >> beam.CombineGlobally(SummaryFn())
            | "Write" >> beam.Map(_write, self.url)
        )


def read_summary(url: str) -> dict[str, Any]:
    """What `WriteSummary` wrote, for the driver after the run."""
    return json.loads(fsio.read_bytes(url))
