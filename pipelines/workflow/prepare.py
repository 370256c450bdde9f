"""`nmtpipe prepare` on the driver: plan, reuse or run the graph, check and commit.

The driver resolves the inputs and fingerprints them with the configuration; if the
output already holds a committed result with that fingerprint it stops there. Otherwise
it runs the Beam graph (`transforms/beam/prepare.py`), which writes every data
file atomically and a summary of them, and then commits the output by writing
`stats.json` and, last, `manifest.json`.
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from typing import TYPE_CHECKING, Any

from nmtpipe import __version__
from nmtpipe.pipelines.beam.options import (
    describe,
    expected_seconds,
    pipeline_options,
    run_branches,
    runs_locally,
)
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig, PreparePlan, make_plan
from nmtpipe.pipelines.workflow.step import Log, Step, run_step
from nmtpipe.transforms.beam.prepare import PrepareCorpus
from nmtpipe.transforms.beam.prepare_fns import write_chars
from nmtpipe.transforms.beam.summary import read_summary
from nmtpipe.transforms.errors import OutputError
from nmtpipe.transforms.formats.dataset_card import dataset_card, split_shards, write_card
from nmtpipe.transforms.formats.pair_shards import write_rejects
from nmtpipe.transforms.formats.prepared import KIND
from nmtpipe.transforms.formats.shard_names import CHARS_PATH, counts_path, pairs_path, rejects_path
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import STAGING, StepOutcome, commit
from nmtpipe.transforms.storage.manifest import STATS_FILE, file_entry
from nmtpipe.transforms.text.records import PAIRS_SCHEMA
from nmtpipe.transforms.text.stats import finalize
from nmtpipe.transforms.vocab.counts import COUNTS_SCHEMA, JOINED, write_counts

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions


def _fill_empty(plan: PreparePlan, files: list[dict[str, Any]]) -> None:
    """Write the shards, count buckets and reject files that got no data, empty."""
    have = {f["path"] for f in files}
    out = plan.output
    for split, n in plan.shard_counts().items():
        for k in range(n):
            if pairs_path(split, k, n) not in have:
                written = fsio.write_parquet(
                    fsio.join(out, pairs_path(split, k, n)), PAIRS_SCHEMA.empty_table()
                )
                files.append(file_entry(out, written, "pairs", 0, split=split))
    for side in (*plan.langs, JOINED):
        for b in range(plan.count_buckets):
            if counts_path(side, b, plan.count_buckets) not in have:
                written = write_counts(
                    fsio.join(out, counts_path(side, b, plan.count_buckets)),
                    COUNTS_SCHEMA.empty_table(),
                )
                files.append(file_entry(out, written, "counts", 0, side=side, bucket=b))
    for k in range(plan.reject_shards):
        if rejects_path(k, plan.reject_shards) not in have:
            written, _ = write_rejects(fsio.join(out, rejects_path(k, plan.reject_shards)), [])
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
        "created": manifest.created_stamp(),
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


def _card(plan: PreparePlan, files: list[dict[str, Any]]) -> str:
    src, tgt = plan.langs
    about = [
        f"Parallel {src}–{tgt} sentence pairs cleaned by `nmtpipe prepare` (options and "
        "inputs in manifest.json; statistics in stats.json). Token counts (`counts/`) and "
        "rejected pairs with their reasons (`rejects/`) are beside the splits, not in them."
    ]
    columns = (
        "`id`, `src` and `tgt` (the texts), `origin` and `line` (where each pair came from), "
        "`src_raw` and `tgt_raw` (valid and test: the lines as read where normalisation "
        "changed them, else null)"
    )
    return dataset_card(f"{src}–{tgt} prepared", about, split_shards(files, "pairs"), columns)


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
    """Where batches are spilled on their way to the writers (`formats/batch_transport.py`).

    "auto" means a local directory when every worker runs on this machine (the local
    runners): the output's staging folder if the output is local, so that a killed run's
    leftovers go with the next commit, else the temporary directory. Other runners use
    Beam's own shuffle.
    """
    if spill_dir == "auto":
        if not runs_locally(options):
            return None
        return fsio.join(output, STAGING) if fsio.is_local(output) else tempfile.gettempdir()
    return None if spill_dir in (None, "none") else spill_dir


class PrepareRun:
    """One output to prepare: its part of a pipeline, then its commit."""

    def __init__(self, plan: PreparePlan, options: PipelineOptions):
        self.plan = plan
        run_id = uuid.uuid4().hex
        self.summary_url = fsio.join(plan.output, STAGING, f"summary-{run_id}.json")
        spill_root = _spill_root(plan.config.spill_dir, options, plan.output)
        self.spill = (
            None if spill_root is None else fsio.join(spill_root, f"nmtpipe-spill-{run_id}")
        )

    def graph(self) -> PrepareCorpus:
        return PrepareCorpus(self.plan.spec(), self.summary_url, self.spill)

    def commit(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Check what the pipeline wrote and commit it: the manifest and statistics."""
        summary = read_summary(self.summary_url)
        stats = finalize(summary["stats"], self.plan.splits)
        files = summary["files"]
        _fill_empty(self.plan, files)
        _check_consistent(files, stats)
        out = self.plan.output
        written = fsio.write_bytes(
            fsio.join(out, STATS_FILE),
            json.dumps(stats, indent=2, sort_keys=True).encode() + b"\n",
        )
        files.append(file_entry(out, written, "stats", 1))
        files.append(write_card(out, _card(self.plan, files)))
        return commit(out, KIND, _manifest_doc(self.plan, files, stats), _OURS), stats


def prepare_plans(
    plans: list[PreparePlan],
    options: PipelineOptions,
    quiet: bool = False,
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Prepare several outputs in one Beam pipeline (one job on a remote runner), then
    commit each; returns their manifests and statistics."""
    runs = [PrepareRun(plan, options) for plan in plans]
    try:
        run_branches(options, "Prepare", [run.graph() for run in runs], quiet)
    finally:
        for run in runs:
            if run.spill is not None:
                fsio.remove_tree(run.spill)
    return [run.commit() for run in runs]


class PrepareStep(Step):
    """`nmtpipe prepare` as a step: its plan (the inputs resolved and fingerprinted), then
    its graph run and committed."""

    kind = KIND

    def __init__(self, config: PrepareConfig) -> None:
        self.plan = make_plan(config)
        self.output, self.fingerprint = self.plan.output, self.plan.fingerprint

    def build(self, beam_args: list[str], log: Log, quiet: bool) -> tuple[dict, dict, str]:
        plan = self.plan
        options = pipeline_options(beam_args, plan.input_bytes)
        runner = describe(options, plan.input_bytes)
        shards = ", ".join(f"{n} {split}" for split, n in plan.clean.split.shards)
        log(f"preparing {len(plan.inputs)} input(s) into {self.output} ({shards} shard(s)) "
            f"on {runner}{_expected(options, plan.input_bytes)}")  # fmt: skip
        ((committed, stats),) = prepare_plans([plan], options, quiet)
        return committed, stats, runner


# prepare's speed on the 2-core VM of benchmarks/RESULTS.md ("Real engines", 2026-11-26):
# 1,000,000 generated pairs (153 MB) in 15.0 s on two worker processes, 1.9 s of which
# is what any local run costs; about 5.8 MB/s per worker process.
_BYTES_PER_SECOND, _FIXED_SECONDS = 5.8e6, 1.9


def _expected(options: Any, input_bytes: int) -> str:
    """`; about 15 s at the benchmarks' speed`, or nothing on a remote runner."""
    seconds = expected_seconds(options, input_bytes, _BYTES_PER_SECOND, _FIXED_SECONDS)
    if seconds is None:
        return ""
    return f"; about {seconds:.0f} s on the 2-core machine of benchmarks/RESULTS.md"


def run_prepare(config: PrepareConfig, beam_args: list[str], **how: Any) -> StepOutcome:
    """Prepare `config.output` unless it already holds this exact result; `how`:
    `run_step`'s force, replace, log and quiet."""
    return run_step(lambda: PrepareStep(config), beam_args, **how)
