"""The `rethreshold` graph: a prepared dataset judged again by other thresholds of its
learned scorers, from its score columns and its rejects, without reading the corpus.

    reject files ─SortRejects─▶ judged rejects by (split, shard) ─┐
              └──────────────▶ the other rejects, as they were ───┼─WriteRejectFiles
    pair shards ──────────────────────────────────RejudgeShards ◀┘─▶ shards, rejects,
    count files ─ReadCounts─▶ partial counts ─┬──────────────────────── count deltas
                                              └─CountTokens◀──────────┘

A rejected pair that the scorers or the near-duplicate groups judged keeps its id, its
normalised text and its scores (`quality/judge.py`): its split and shard come again from
its text (`text/split.py`, its id checked), and each shard's pairs and judged rejects
are judged as one `prepare` with the new thresholds would judge them, with the model
score beside them where `nmtpipe score`'s files are given (`quality/models/dcce.py`;
the train shards' pairs only: others have none, and are kept by it). The token counts
are the dataset's own plus what the pairs kept again add and less what the pairs now
rejected take back: no pair of the corpus is tokenized again but those.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.pvalue import TaggedOutput

from nmtpipe.transforms.beam import summary
from nmtpipe.transforms.beam.prepare import CountTokens, WriteRejectFiles
from nmtpipe.transforms.beam.prepare_fns import (
    COUNTS,
    FILES,
    REJECTS,
    STATS,
    reject_stats,
    ship_counts,
    ship_rejects,
)
from nmtpipe.transforms.formats import batch_transport
from nmtpipe.transforms.formats.pair_shards import split_stats
from nmtpipe.transforms.formats.shard_names import counts_path, pairs_path
from nmtpipe.transforms.quality.judge import PREFIX, Thresholds, rejudge
from nmtpipe.transforms.quality.models import dcce
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.manifest import file_entry
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.records import by_key
from nmtpipe.transforms.text.split import SPLITS, Placer, SplitConfig
from nmtpipe.transforms.vocab import counts as counts_lib
from nmtpipe.transforms.vocab.counts import COUNTS_SCHEMA

JUDGED = "judged"


@dataclass(frozen=True)
class RethresholdSpec:
    """What the graph needs to know (small: it is pickled with the DoFns)."""

    source: str  # the prepared dataset
    output: str
    langs: tuple[str, str]
    split: SplitConfig
    count_buckets: int
    reject_shards: int
    reject_files: tuple[str, ...]  # the source's, relative to it
    thresholds: Thresholds
    columns: tuple[str, ...]  # the score columns, in the shards' order
    dcce_scores: str | None = None  # the files of `nmtpipe score`, if judged by them

    @property
    def shard_counts(self) -> dict[str, int]:
        return dict(self.split.shards)


class SortRejectsFn(beam.DoFn):
    """A reject file of the source → its judged rejects keyed by the (split, shard) their
    text places them in (main output), and the others as they were, keyed by reject
    shard (REJECTS)."""

    def __init__(self, spec: RethresholdSpec, spill_dir: str | None) -> None:
        self.spec, self.spill_dir = spec, spill_dir

    def setup(self) -> None:
        self.placer = Placer(self.spec.split)

    def process(self, path: str) -> Iterator[Any]:
        table = fsio.read_parquet(fsio.join(self.spec.source, path))
        judged = pc.is_valid(table["scores"])
        kept_as_was = table.filter(pc.invert(judged))
        spill = batch_transport.spill_url(self.spill_dir, f"rejects {path}")
        yield from ship_rejects(kept_as_was, self.spec.reject_shards, spill)
        judged_rows = table.filter(judged)
        if not judged_rows.num_rows:
            return
        placed = self.placer.place(
            judged_rows["src"].cast(pa.string()).to_pylist(),
            judged_rows["tgt"].cast(pa.string()).to_pylist(),
            "train",
        )
        if not np.array_equal(placed.ids, judged_rows["id"].to_numpy()):
            raise ValueError(
                f"{fsio.join(self.spec.source, path)}: a judged reject's text does not hash to "
                "its id (the split options or the file changed since prepare)"
            )
        key = (placed.splits.astype(np.int64) << 32) | placed.shards
        batches = {
            (SPLITS[int(k) >> 32], int(k) & 0xFFFFFFFF): batch_transport.one_batch(part)
            for k, part in by_key(judged_rows, key).items()
        }
        spill = batch_transport.spill_url(self.spill_dir, f"judged {path}")
        yield from batch_transport.ship(batches, spill)


class RejudgeShardFn(beam.DoFn):
    """((split, shard), {"judged": [shipped rejects]}) → the shard judged again by the
    new thresholds and written; tagged outputs as `WritePairShardsFn`'s: its manifest
    entry (FILES), its statistics (STATS), its rejects (REJECTS) and in the train split
    the token counts of the pairs kept again, less those of the pairs now rejected
    (COUNTS)."""

    def __init__(self, spec: RethresholdSpec, spill_dir: str | None) -> None:
        self.spec, self.spill_dir = spec, spill_dir

    def process(self, element: tuple[tuple[str, int], dict[str, Iterable[Any]]]) -> Iterator[Any]:
        (split, shard), found = element
        s = self.spec
        path = pairs_path(split, shard, s.shard_counts[split])
        before = fsio.read_parquet(fsio.join(s.source, path))
        if s.dcce_scores is not None:
            before = _with_dcce(before, s.dcce_scores, path, split)
        judged = batch_transport.rejects_table(found.get(JUDGED, ()))
        kept, rejects, scores = rejudge(before, judged, list(s.columns), s.thresholds)
        written = fsio.write_parquet(fsio.join(s.output, path), kept)
        yield TaggedOutput(
            FILES, file_entry(s.output, written, "pairs", kept.num_rows, split=split)
        )
        yield TaggedOutput(
            STATS, {**reject_stats(rejects), "splits": {split: split_stats(kept)}, **scores}
        )
        spill = batch_transport.spill_url(self.spill_dir, f"rejudged {split} {shard}")
        yield from ship_rejects(rejects, s.reject_shards, spill)
        if split == "train":
            was_kept = pc.is_in(kept["id"], before["id"])
            now_rejected = pc.is_in(rejects["id"], before["id"])
            deltas = _token_deltas(kept.filter(pc.invert(was_kept)), rejects.filter(now_rejected))
            spill = batch_transport.spill_url(self.spill_dir, f"counts {split} {shard}")
            yield from ship_counts(dict(zip(s.langs, deltas, strict=True)), s.count_buckets, spill)


def _with_dcce(table: pa.Table, scores: str, path: str, split: str) -> pa.Table:
    """A shard's pairs with their DCCE column (NaN outside the train split), in place of
    any the source had."""
    column = PREFIX + dcce.NAME
    if column in table.column_names:
        table = table.drop_columns([column])
    if split == "train":
        values = dcce.scores_for(scores, path, table["id"].to_numpy())
    else:
        values = np.full(table.num_rows, np.nan, dtype=np.float32)
    return table.append_column(column, pa.array(values, pa.float32()))


def _token_deltas(back: pa.Table, gone: pa.Table) -> list[pa.Table]:
    """Per side, the token counts the pairs kept again (`back`) add and those now
    rejected (`gone`) take back."""
    deltas = []
    for field in ("src", "tgt"):
        parts = [
            counts_lib.count_table(
                t2t_tokenizer.token_array(table[field].cast(pa.string()).to_pylist()), sign
            )
            for table, sign in ((back, 1), (gone, -1))
            if table.num_rows
        ]
        deltas.append(counts_lib.sum_counts(parts) if parts else COUNTS_SCHEMA.empty_table())
    return deltas


class ReadCountsFn(beam.DoFn):
    """(side, bucket) of the source → its token counts, shipped as a partial of that
    bucket (as the cleaning stage ships its tallies)."""

    def __init__(self, spec: RethresholdSpec, spill_dir: str | None) -> None:
        self.spec, self.spill_dir = spec, spill_dir

    def process(self, element: tuple[str, int]) -> Iterator[Any]:
        side, bucket = element
        s = self.spec
        url = fsio.join(s.source, counts_path(side, bucket, s.count_buckets))
        table = fsio.read_parquet(url, columns=COUNTS_SCHEMA.names)
        spill = batch_transport.spill_url(self.spill_dir, f"counts of {side} {bucket}")
        yield from ship_counts({side: table}, s.count_buckets, spill)


class Rethreshold(beam.PTransform):
    """The whole graph, from the pipeline's start; its only driver-visible result is the
    summary file at `summary_url` (files written and statistics)."""

    def __init__(self, spec: RethresholdSpec, summary_url: str, spill_dir: str | None) -> None:
        super().__init__()
        self.spec, self.summary_url, self.spill_dir = spec, summary_url, spill_dir

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        s, spill = self.spec, self.spill_dir
        sorted_rejects = (
            pbegin
            | "ListRejects" >> beam.Create(s.reject_files)
            | "SortRejects"
            >> beam.ParDo(SortRejectsFn(s, spill)).with_outputs(REJECTS, main=JUDGED)
        )
        shards = [(split, k) for split, n in s.split.shards for k in range(n)]
        listed = pbegin | "ListShards" >> beam.Create([(key, None) for key in shards])
        rejudged = (
            {"shard": listed, JUDGED: sorted_rejects[JUDGED]}
            | "GroupByShard" >> beam.CoGroupByKey()
            | "RejudgeShards"
            >> beam.ParDo(RejudgeShardFn(s, spill)).with_outputs(FILES, STATS, REJECTS, COUNTS)
        )
        reject_files = (
            sorted_rejects[REJECTS],
            rejudged[REJECTS],
        ) | "WriteRejectFiles" >> WriteRejectFiles(s.output, s.reject_shards)
        count_keys = [(side, b) for side in s.langs for b in range(s.count_buckets)]
        counted = (
            pbegin
            | "ListCounts" >> beam.Create(count_keys)
            | "ReadCounts" >> beam.ParDo(ReadCountsFn(s, spill)).with_outputs(COUNTS)
        )
        counts = (counted[COUNTS], rejudged[COUNTS]) | "CountTokens" >> CountTokens(
            s.output, s.langs, s.count_buckets
        )
        files = (rejudged[FILES], reject_files, counts[FILES])
        stats = (rejudged[STATS], counts[STATS])
        return (files, stats) | "Summarize" >> summary.SummarizeParts(self.summary_url)
