"""What a step's pipeline tells its driver: the files it wrote and merged statistics.

Workers emit ("file", manifest entry) and ("stats", partial) elements; `SummaryFn`
combines them into one small summary and `WriteSummary` writes it as the one file the
pipeline leaves for its driver, which reads it back after the run (`read_summary`), so
the driver can write the manifest without listing or reading any data.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import apache_beam as beam

from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.text.stats import merge_into

FILE, STATS = "file", "stats"


class SummaryFn(beam.CombineFn):
    """Gathers ("file", FileEntry) and ("stats", partial) into one summary for the driver."""

    def create_accumulator(self) -> dict[str, Any]:
        return {"files": [], "stats": {}}

    def add_input(self, acc: dict[str, Any], item: tuple[str, Any]) -> dict[str, Any]:
        kind, value = item
        if kind == FILE:
            acc["files"].append(value)
        else:
            merge_into(acc["stats"], value)
        return acc

    def merge_accumulators(self, accs: Iterable[dict[str, Any]]) -> dict[str, Any]:
        merged = self.create_accumulator()
        for acc in accs:
            merged["files"].extend(acc["files"])
            merge_into(merged["stats"], acc["stats"])
        return merged

    def extract_output(self, acc: dict[str, Any]) -> dict[str, Any]:
        return {"files": sorted(acc["files"], key=lambda f: f["path"]), "stats": acc["stats"]}


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
