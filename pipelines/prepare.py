"""`nmtpipe prepare`: raw parallel corpora → clean, split, sharded Parquet + token counts.

The driver resolves the inputs and fingerprints them with the configuration; if the
output already holds a committed result with that fingerprint it stops there. Otherwise
it runs the Beam pipeline built by `build_graph`, which writes every data file
atomically and a summary of them, and then commits the output by writing `stats.json`
and, last, `manifest.json`.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipelines import __version__
from pipelines.beam_options import LOCAL_RUNNERS, describe, pipeline_options, run_branches
from pipelines.prepare_plan import KIND, PrepareConfig, PreparePlan, make_plan
from pipelines.step_output import STAGING, StepOutcome, commit, reuse_committed
from transforms import storage
from transforms.counts import write_counts
from transforms.errors import OutputError
from transforms.manifest import file_entry
from transforms.prepare_fns import (
    CHARS,
    CHARS_PATH,
    COUNTS,
    FILES,
    JOINED,
    REJECTS,
    STATS,
    CleanChunksFn,
    MergeCountsFn,
    PlanChunksFn,
    WriteCountsFn,
    WritePairShardsFn,
    WriteRejectsFn,
    counts_path,
    pairs_path,
    rejects_path,
    write_chars,
)
from transforms.records import PAIRS_SCHEMA
from transforms.shards import write_rejects
from transforms.stats import finalize
from transforms.summary import WriteSummary, read_summary

STATS_FILE = "stats.json"


def _bucket_key(key: tuple[str, int], counts: dict[str, int]) -> tuple[int, tuple[str, dict]]:
    side, bucket = key
    return bucket, (side, counts)


def build_graph(
    p: beam.Pipeline | beam.pvalue.PBegin,
    plan: PreparePlan,
    summary_url: str,
    spill_dir: str | None = None,
) -> beam.PCollection:
    """The prepare pipeline; its only driver-visible result is the summary file.

    Shards, buckets and reject files that receive no data are not written here; the
    driver fills them in (see `_fill_empty`).
    """
    out, langs = plan.output, plan.langs
    cleaned = (
        p
        | "ListInputs" >> beam.Create(plan.inputs)
        | "PlanChunks" >> beam.ParDo(PlanChunksFn(plan.config.chunk_lines))
        | "Redistribute" >> beam.Reshuffle()
        | "Clean"
        >> beam.ParDo(
            CleanChunksFn(plan.clean, langs, plan.count_buckets, plan.reject_shards, spill_dir)
        ).with_outputs(REJECTS, COUNTS, STATS, main="pairs")
    )
    shards = (
        cleaned.pairs
        | "GroupByShard" >> beam.GroupByKey()
        | "WritePairShards"
        >> beam.ParDo(
            WritePairShardsFn(
                out, plan.shard_counts(), langs, plan.count_buckets, plan.reject_shards, spill_dir
            )
        ).with_outputs(FILES, STATS, REJECTS, COUNTS)
    )
    reject_files = (
        (cleaned[REJECTS], shards[REJECTS])
        | "GatherRejects" >> beam.Flatten()
        | "GroupRejects" >> beam.GroupByKey()
        | "WriteRejects" >> beam.ParDo(WriteRejectsFn(out, plan.reject_shards))
    )
    counted = cleaned[COUNTS] | "SumCounts" >> beam.CombinePerKey(
        MergeCountsFn()
    ).with_hot_key_fanout(plan.config.count_fanout)
    taken_back = shards[COUNTS] | "SumDuplicateCounts" >> beam.CombinePerKey(MergeCountsFn())
    count_files = (
        (counted, taken_back)
        | "GatherCounts" >> beam.Flatten()
        | "ByBucket" >> beam.MapTuple(_bucket_key)
        | "GroupBuckets" >> beam.GroupByKey()
        | "WriteCounts"
        >> beam.ParDo(WriteCountsFn(out, langs, plan.count_buckets)).with_outputs(
            CHARS, STATS, main="files"
        )
    )
    chars_file = (
        count_files[CHARS]
        | "SumChars" >> beam.CombinePerKey(MergeCountsFn())
        | "AllSides" >> beam.combiners.ToList()
        | "WriteChars" >> beam.Map(write_chars, out)
    )
    files = (
        (shards[FILES], reject_files, count_files.files, chars_file)
        | "GatherFiles" >> beam.Flatten()
        | "TagFiles" >> beam.Map(lambda f: ("file", f))
    )
    stats = (
        (cleaned[STATS], shards[STATS], count_files[STATS])
        | "GatherStats" >> beam.Flatten()
        | "TagStats" >> beam.Map(lambda s: ("stats", s))
    )
    return (
        (files, stats)
        | "GatherSummary" >> beam.Flatten()
        | "Summarize" >> WriteSummary(summary_url)
    )


def _fill_empty(plan: PreparePlan, files: list[dict[str, Any]]) -> None:
    """Write the shards, count buckets and reject files that got no data, empty."""
    have = {f["path"] for f in files}
    out = plan.output
    for split, n in plan.shard_counts().items():
        for k in range(n):
            if pairs_path(split, k, n) not in have:
                written = storage.write_parquet(
                    storage.join(out, pairs_path(split, k, n)), PAIRS_SCHEMA.empty_table()
                )
                files.append(file_entry(out, written, "pairs", 0, split=split))
    for side in (*plan.langs, JOINED):
        for b in range(plan.count_buckets):
            if counts_path(side, b, plan.count_buckets) not in have:
                written = write_counts(
                    storage.join(out, counts_path(side, b, plan.count_buckets)), {}
                )
                files.append(file_entry(out, written, "counts", 0, side=side, bucket=b))
    for k in range(plan.reject_shards):
        if rejects_path(k, plan.reject_shards) not in have:
            written, _ = write_rejects(storage.join(out, rejects_path(k, plan.reject_shards)), [])
            files.append(file_entry(out, written, "rejects", 0))
    if CHARS_PATH not in have:
        files.append(write_chars([], out))
    files.sort(key=lambda f: f["path"])


def _manifest_doc(
    plan: PreparePlan, files: list[dict[str, Any]], stats: dict[str, Any]
) -> dict[str, Any]:
    def paths(**match: str) -> list[str]:
        return sorted(f["path"] for f in files if all(f.get(k) == v for k, v in match.items()))

    return {
        "kind": KIND,
        "code_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "fingerprint": plan.fingerprint,
        "inputs": list(plan.identities),
        "options": plan.options(),
        "splits": {
            split: {"pairs": stats["splits"][split], "files": paths(kind="pairs", split=split)}
            for split in plan.splits
        },
        "counts": {side: paths(kind="counts", side=side) for side in (*plan.langs, JOINED)}
        | {"chars": CHARS_PATH},
        "rejects": {"pairs": stats["pairs_rejected"], "files": paths(kind="rejects")},
        "stats": STATS_FILE,
        "files": files,
    }


def _check_consistent(files: list[dict[str, Any]], stats: dict[str, Any]) -> None:
    """Refuse to commit unless the files and the statistics account for every pair."""
    rows = sum(f["rows"] for f in files if f["kind"] == "pairs")
    rejected = sum(f["rows"] for f in files if f["kind"] == "rejects")
    if (rows, rejected) != (stats["pairs_kept"], stats["pairs_rejected"]) or (
        stats["pairs_read"] != rows + rejected
    ):
        raise OutputError(
            f"counts disagree: read {stats['pairs_read']}, wrote {rows} pairs and "
            f"{rejected} rejects; nothing committed"
        )


_OURS = re.compile(
    r"^((train|valid|test)-\d{5}-of-\d{5}\.parquet|counts/.*\.parquet|rejects/.*\.parquet)$"
)


def _spill_root(spill_dir: str | None, options: PipelineOptions, output: str) -> str | None:
    """Where batches are spilled on their way to the writers (see `transforms/records.py`).

    "auto" means a local directory when every worker runs on this machine (the local
    runners): the output's staging folder if the output is local, so that a killed run's
    leftovers go with the next commit, else the temporary directory. Other runners use
    Beam's own shuffle.
    """
    if spill_dir == "auto":
        if options.view_as(StandardOptions).runner not in LOCAL_RUNNERS:
            return None
        return storage.join(output, STAGING) if storage.is_local(output) else tempfile.gettempdir()
    return None if spill_dir in (None, "none") else spill_dir


class PrepareRun:
    """One output to prepare: its part of a pipeline, then its commit."""

    def __init__(self, plan: PreparePlan, options: PipelineOptions, spill_dir: str | None):
        self.plan = plan
        run_id = uuid.uuid4().hex
        self.summary_url = storage.join(plan.output, STAGING, f"summary-{run_id}.json")
        spill_root = _spill_root(spill_dir, options, plan.output)
        self.spill = (
            None if spill_root is None else storage.join(spill_root, f"nmtpipe-spill-{run_id}")
        )

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return build_graph(pbegin, self.plan, self.summary_url, self.spill)

    def commit(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Check what the pipeline wrote and commit it: the manifest and statistics."""
        summary = read_summary(self.summary_url)
        stats = finalize(summary["stats"], self.plan.splits)
        files = summary["files"]
        _fill_empty(self.plan, files)
        _check_consistent(files, stats)
        out = self.plan.output
        written = storage.write_bytes(
            storage.join(out, STATS_FILE),
            json.dumps(stats, indent=2, sort_keys=True).encode() + b"\n",
        )
        files.append(file_entry(out, written, "stats", 1))
        return commit(out, KIND, _manifest_doc(self.plan, files, stats), _OURS), stats


def prepare_plans(
    plans: list[PreparePlan],
    options: PipelineOptions,
    spill_dir: str | None = "auto",
    quiet: bool = False,
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Prepare several outputs in one Beam pipeline (one job on a remote runner), then
    commit each; returns their manifests and statistics."""
    runs = [PrepareRun(plan, options, spill_dir) for plan in plans]
    try:
        run_branches(options, "Prepare", [run.expand for run in runs], quiet)
    finally:
        for run in runs:
            if run.spill is not None:
                storage.remove_tree(run.spill)
    return [run.commit() for run in runs]


def run_prepare(
    config: PrepareConfig,
    beam_args: list[str],
    force: bool = False,
    replace: bool = False,
    log: Callable[[str], None] = lambda _: None,
    spill_dir: str | None = "auto",
    quiet: bool = False,
) -> StepOutcome:
    """Prepare `config.output` unless it already holds this exact result.

    `quiet` keeps local Beam workers from writing to the terminal (see `run_pipeline`).
    """
    started = time.perf_counter()
    options = pipeline_options(beam_args)
    plan = make_plan(config)
    out = plan.output
    committed = reuse_committed(out, KIND, plan.fingerprint, force, log, replace)
    if committed is not None:
        stats = json.loads(storage.read_bytes(storage.join(out, STATS_FILE)))
        return StepOutcome(out, True, committed, stats, time.perf_counter() - started, "cached")
    runner = describe(options)
    log(f"preparing {len(plan.inputs)} input(s) into {out} on {runner}")
    ((committed, stats),) = prepare_plans([plan], options, spill_dir, quiet)
    return StepOutcome(out, False, committed, stats, time.perf_counter() - started, runner)
