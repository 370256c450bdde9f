"""`nmtpipe prepare` on the driver: plan, reuse or run the graph, check and commit.

The driver resolves the inputs and fingerprints them with the configuration; if the
output already holds a committed result with that fingerprint it stops there. Otherwise
it runs the Beam graph (`transforms/beam/prepare.py`), which writes every data file
atomically and a summary of them, and then commits the output (`steps/protocol.py`).
"""

from __future__ import annotations

import re
import tempfile
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from nmtpipe import __version__
from nmtpipe.pipelines.beam.options import runs_locally
from nmtpipe.pipelines.workflow.prepare_plan import (
    PrepareConfig,
    PreparePlan,
    check_named_encodings,
    make_plan,
)
from nmtpipe.pipelines.workflow.steps.beam_steps import BeamStep
from nmtpipe.pipelines.workflow.steps.protocol import Log, Written
from nmtpipe.pipelines.workflow.steps.runner import run_step
from nmtpipe.transforms.beam.prepare import PrepareCorpus
from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.errors import InputError, OutputError
from nmtpipe.transforms.formats.dataset_card import dataset_card, split_shards
from nmtpipe.transforms.formats.pair_shards import write_rejects
from nmtpipe.transforms.formats.prepared import KIND, write_chars
from nmtpipe.transforms.formats.shard_names import CHARS_PATH, counts_path, pairs_path, rejects_path
from nmtpipe.transforms.quality.judge import PREFIX
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.commit import STAGING, StepOutcome
from nmtpipe.transforms.storage.manifest import STATS_FILE, file_entry
from nmtpipe.transforms.storage.read_meter import Meter
from nmtpipe.transforms.text.filters import (
    BAD_RECORD,
    DUPLICATE,
    EMPTY,
    INVALID_UTF8,
    OVERLAP,
    TOO_LONG,
    UNDECODABLE,
    WRONG_LANGUAGE,
)
from nmtpipe.transforms.text.stats import finalize
from nmtpipe.transforms.vocab.counts import COUNTS_SCHEMA, JOINED, write_counts

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions


@dataclass(frozen=True)
class Prepared:
    """What a prepared output holds, whatever writes it (`prepare`, `rethreshold`): its
    layout and what its manifest records of how it was made."""

    output: str
    langs: tuple[str, str]
    shard_counts: dict[str, int]
    count_buckets: int
    reject_shards: int
    pairs_schema: pa.Schema
    fingerprint: str
    identities: tuple[dict[str, Any], ...]
    options: dict[str, Any]
    code_version: str = __version__

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.shard_counts)


def prepared_of(plan: PreparePlan) -> Prepared:
    return Prepared(
        output=plan.output,
        langs=plan.langs,
        shard_counts=plan.shard_counts(),
        count_buckets=plan.count_buckets,
        reject_shards=plan.reject_shards,
        pairs_schema=plan.pairs_schema(),
        fingerprint=plan.fingerprint,
        identities=plan.identities,
        options=plan.options(),
    )


def fill_empty(out: Prepared, files: list[dict[str, Any]]) -> None:
    """Write the shards, count buckets and reject files that got no data, empty."""
    have = {f["path"] for f in files}
    for split, n in out.shard_counts.items():
        for k in range(n):
            if pairs_path(split, k, n) not in have:
                written = fsio.write_parquet(
                    fsio.join(out.output, pairs_path(split, k, n)), out.pairs_schema.empty_table()
                )
                files.append(file_entry(out.output, written, "pairs", 0, split=split))
    for side in (*out.langs, JOINED):
        for b in range(out.count_buckets):
            if counts_path(side, b, out.count_buckets) not in have:
                written = write_counts(
                    fsio.join(out.output, counts_path(side, b, out.count_buckets)),
                    COUNTS_SCHEMA.empty_table(),
                )
                files.append(file_entry(out.output, written, "counts", 0, side=side, bucket=b))
    for k in range(out.reject_shards):
        if rejects_path(k, out.reject_shards) not in have:
            written, _ = write_rejects(
                fsio.join(out.output, rejects_path(k, out.reject_shards)), []
            )
            files.append(file_entry(out.output, written, "rejects", 0))
    if CHARS_PATH not in have:
        files.append(write_chars([], out.output))
    files.sort(key=lambda f: f["path"])


def manifest_doc(
    out: Prepared, files: list[dict[str, Any]], stats: dict[str, Any]
) -> dict[str, Any]:
    def paths(**match: str) -> list[str]:
        return sorted(f["path"] for f in files if all(f.get(k) == v for k, v in match.items()))

    return {
        "inputs": [_with_encoding(ident, stats) for ident in out.identities],
        "options": out.options,
        "splits": {
            split: {"pairs": stats["splits"][split], "files": paths(kind="pairs", split=split)}
            for split in out.splits
        },
        "counts": {side: paths(kind="counts", side=side) for side in (*out.langs, JOINED)}
        | {"chars": CHARS_PATH},
        "rejects": {"pairs": stats["pairs_rejected"], "files": paths(kind="rejects")},
        "stats": STATS_FILE,
        "files": files,
    }


def _with_encoding(ident: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """An input's identity with the encoding each side was read in (found while reading)."""
    found = stats["inputs"].get(ident["origin"], {}).get("encoding")
    return {**ident, "encoding": found} if found else ident


def check_every_input_read(origins: list[str], stats: dict[str, Any]) -> None:
    """Refuse to commit a run that found no record in an input (empty files, a TMX
    without `<tu>`, a table without rows): a download that failed or a wrong path, whose
    dataset would be empty or lack that input, and say so only at a later step."""
    for origin in origins:
        if not stats["inputs"].get(origin, {}).get("read"):
            raise InputError(f"{origin}: no pairs in it (empty?); nothing committed")


def check_every_input_kept(stats: dict[str, Any]) -> None:
    """Refuse to commit a run that kept none of the pairs of an input it read some
    from, unless all went as duplicates or overlap: such an input was read wrong (its
    encoding, its fields, the languages' order), and a dataset without it would fail
    only at a later step, or not at all."""
    for origin, info in stats["inputs"].items():
        rejects = info["rejects"]
        if not info["read"] or info["kept"] or not set(rejects) - {DUPLICATE, OVERLAP}:
            continue
        ranked = sorted(rejects.items(), key=lambda item: (-item[1], item[0]))
        found = ", ".join(f"{reason} {n:,}" for reason, n in ranked[:3])
        read_as = ", ".join(f"{side} {name}" for side, name in info.get("encoding", {}).items())
        hint = _HINTS.get(ranked[0][0], "")
        raise InputError(
            f"{origin}: none of its {info['read']:,} pairs kept (read as {read_as or '?'}; "
            f"rejected: {found}){hint}; nothing committed"
        )


_HINTS = {
    INVALID_UTF8: "; name its encoding with --src-encoding/--tgt-encoding",
    UNDECODABLE: "; name its encoding with --src-encoding/--tgt-encoding",
    WRONG_LANGUAGE: "; are --src-lang and --tgt-lang its languages, in its order?",
    EMPTY: "; for a table, name its fields with --table-columns",
    BAD_RECORD: "; for a table, name its fields with --table-columns",
    TOO_LONG: "; lines end at LF (\\n): a file whose lines end in CR alone reads as one line",
}


def card(out: Prepared, files: list[dict[str, Any]]) -> str:
    src, tgt = out.langs
    about = [
        f"Parallel {src}–{tgt} sentence pairs cleaned by `nmtpipe prepare` (options and "
        "inputs in manifest.json; statistics in stats.json). Token counts (`counts/`) and "
        "rejected pairs with their reasons (`rejects/`) are beside the splits, not in them."
    ]
    scores = [name for name in out.pairs_schema.names if name.startswith(PREFIX)]
    columns = (
        "`id`, `src` and `tgt` (the texts), `origin` and `line` (where each pair came from), "
        "`src_raw` and `tgt_raw` (valid and test: the lines as read where normalisation "
        "changed them, else null)"
        + (f", and the pair scores {', '.join(f'`{c}`' for c in scores)}" if scores else "")
    )
    return dataset_card(f"{src}–{tgt} prepared", about, split_shards(files, "pairs"), columns)


def check_consistent(files: list[dict[str, Any]], stats: dict[str, Any]) -> None:
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


_NAMED_WHOLE = 3  # inputs read whole the plan's line names (and counts the rest)
OURS = re.compile(
    r"^((train|valid|test)-\d{5}-of-\d{5}\.parquet|counts/.*\.parquet|rejects/.*\.parquet)$"
)


def spill_root(spill_dir: str | None, options: PipelineOptions, output: str) -> str | None:
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


class PrepareStep(BeamStep):
    """`nmtpipe prepare` as a step: its plan (the inputs resolved and fingerprinted with
    the options, `make_plan`), the graph that cleans, splits, counts and shards them,
    and the commit."""

    kind = KIND
    label = "Prepare"
    ours = OURS
    command = "prepare"
    dataset_report = True

    def __init__(self, plan: PreparePlan) -> None:
        self.plan = plan
        self.output, self.fingerprint = plan.output, plan.fingerprint
        self.input_bytes = plan.input_bytes
        self.spill: str | None = None

    def announce(self, runner: str, options: PipelineOptions) -> str:
        plan = self.plan
        shards = ", ".join(f"{n} {split}" for split, n in plan.clean.split.shards)
        line = (
            f"preparing {len(plan.inputs)} input(s) into {self.output} ({shards} shard(s)) "
            f"on {runner}"
        )
        whole = [
            f"{inp.origin} ({why})"
            for inp in plan.inputs
            if (why := registry.reader(inp.reader).whole(inp)) is not None
        ]
        if whole:
            shown = ", ".join(whole[:_NAMED_WHOLE])
            more = f" and {len(whole) - _NAMED_WHOLE} more" if len(whole) > _NAMED_WHOLE else ""
            line += f"; read by one worker each, as they cannot be split: {shown}{more}"
        return line

    def graph(self, options: PipelineOptions, meter: Meter | None = None) -> PrepareCorpus:
        check_named_encodings(self.plan.inputs)  # before any work
        root = spill_root(self.plan.config.spill_dir, options, self.output)
        if root is not None:
            self.spill = fsio.join(root, f"nmtpipe-spill-{uuid.uuid4().hex}")
        return PrepareCorpus(self.plan.spec(), self.summary_url, self.spill, meter)

    def release(self) -> None:
        if self.spill is not None:
            fsio.remove_tree(self.spill)

    def write(self, summary: dict[str, Any] | None, log: Log) -> Written:
        assert summary is not None
        stats = finalize(summary["stats"], self.plan.splits)
        files = summary["files"]
        check_every_input_read([i.origin for i in self.plan.inputs], stats)
        check_every_input_kept(stats)
        fill_empty(prepared_of(self.plan), files)
        check_consistent(files, stats)
        return Written(files, stats)

    def card(self, files: list[dict[str, Any]]) -> str:
        return card(prepared_of(self.plan), files)

    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        assert stats is not None
        return manifest_doc(prepared_of(self.plan), files, stats)

    def figures(self, outcome: StepOutcome) -> str:
        splits = outcome.manifest["splits"]
        return ", ".join(f"{split} {info['pairs']:,}" for split, info in splits.items())


def run_prepare(config: PrepareConfig, beam_args: list[str], **how: Any) -> StepOutcome:
    """Prepare `config.output` unless it already holds this exact result; `how`:
    `run_steps`' force, replace, log and quiet."""
    return run_step(lambda: PrepareStep(make_plan(config)), beam_args, **how)
