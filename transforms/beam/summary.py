"""What a step's pipeline tells its driver: the files it wrote and merged statistics.

Workers emit ("file", manifest entry) and ("stats", partial) elements; `SummaryFn`
combines them into one small summary and `WriteSummary` writes it as the one file the
pipeline leaves for its driver (`formats/step_summary.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apache_beam as beam

from nmtpipe.transforms.formats.step_summary import write_summary
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


class WriteSummary(beam.PTransform):
    """Tagged ("file" | "stats", value) elements → one summary file at `url`."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def expand(self, tagged: beam.PCollection) -> beam.PCollection:
        return (
            tagged
            | "Combine" >> beam.CombineGlobally(SummaryFn())
            | "Write" >> beam.Map(write_summary, self.url)
        )


class SummarizeParts(beam.PTransform):
    """(the PCollections of manifest entries, those of statistics partials) → one summary
    file at `url`: how a graph that writes from several branches ends."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def expand(
        self, parts: tuple[tuple[beam.PCollection, ...], tuple[beam.PCollection, ...]]
    ) -> beam.PCollection:
        files, stats = parts
        tagged = (
            files
            | "GatherFiles" >> beam.Flatten()
            | "TagFiles" >> beam.Map(lambda entry: (FILE, entry)),
            stats
            | "GatherStats" >> beam.Flatten()
            | "TagStats" >> beam.Map(lambda partial: (STATS, partial)),
        )
        return tagged | "GatherSummary" >> beam.Flatten() | "Write" >> WriteSummary(self.url)
