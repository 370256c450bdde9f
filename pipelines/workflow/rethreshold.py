"""`nmtpipe rethreshold` on the driver: a prepared dataset judged again by other
thresholds of its learned scorers, into a new output, without the corpus.

What changes is only what the thresholds decide: which pairs are kept, the rejects,
the token counts and the statistics of the kept pairs. The result is the dataset that
`prepare` with those thresholds would commit, to the byte (its shards, counts and
rejects) and to the fingerprint: the options recorded are the source's with the new
thresholds, and later steps reuse it as they would that one. Options that change what
a scorer learns or scores (which scorers, `--lexical-bits`, the rules) need the corpus:
`prepare` again.

The model score (`transforms/quality/models/dcce.py`) joins here, not in `prepare`:
given the files `nmtpipe score` wrote for this very dataset (`--dcce-scores`), its train
pairs below `--dcce-min` are rejected as `dcce`, their scores kept as every scorer's
are, and what the scores came from (the two checkpoints, by digest) is recorded in the
options, so in the fingerprint and the manifest.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from nmtpipe.pipelines.workflow.prepare import (
    OURS,
    Prepared,
    card,
    check_consistent,
    check_every_input_kept,
    fill_empty,
    manifest_doc,
    spill_root,
)
from nmtpipe.pipelines.workflow.steps.beam_steps import BeamStep
from nmtpipe.pipelines.workflow.steps.protocol import Log, Written, read_stats
from nmtpipe.pipelines.workflow.steps.runner import run_step
from nmtpipe.trainers.runtime.run_files import SCORE_SUMMARY
from nmtpipe.transforms.beam.rethreshold import Rethreshold, RethresholdSpec
from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.formats.prepared import KIND
from nmtpipe.transforms.quality.base import LearnedScorer
from nmtpipe.transforms.quality.judge import NEAR_DUPLICATE, PREFIX, Thresholds
from nmtpipe.transforms.quality.models import dcce
from nmtpipe.transforms.quality.registry import KINDS
from nmtpipe.transforms.quality.thresholds import in_force
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import StepOutcome
from nmtpipe.transforms.storage.read_meter import Meter
from nmtpipe.transforms.text.records import PAIRS_SCHEMA
from nmtpipe.transforms.text.split import SplitConfig
from nmtpipe.transforms.text.stats import Partial, finalize, merge_into

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions


def thresholds_of() -> dict[str, str]:
    """Every threshold option of the registered learned scorers → its scorer's name."""
    return {
        name: kind.NAME
        for kind in KINDS.values()
        if issubclass(kind, LearnedScorer)
        for name in kind.THRESHOLDS
    }


def _learned_scorers(
    quality: Mapping[str, Any], changes: Mapping[str, Any], source: str
) -> list[LearnedScorer]:
    """The source's learned scorers with their options, `changes` applied; a change
    that is not a threshold of one of them is refused."""
    chosen = list(quality.get("scorers", ()))
    owners = thresholds_of()
    for name in changes:
        if owners.get(name) not in chosen:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(
                f"{flag}: {source} was not scored by {owners.get(name, name)} "
                f"(its scorers: {', '.join(chosen) or 'none'})"
            )
    scorers = []
    for name in chosen:
        kind = KINDS.get(name)
        if kind is None:
            raise InputError(f"{source}: scored by {name}, which this nmtpipe does not know")
        if issubclass(kind, LearnedScorer):
            options = {**quality[name], **{k: v for k, v in changes.items() if owners[k] == name}}
            scorers.append(kind(kind.Config(**options)))
    return scorers


def model_scores(scores: str, dcce_min: float, doc: Mapping[str, Any]) -> dcce.DcceScorer:
    """The DCCE scorer of the scores `nmtpipe score` committed at `scores` for the
    prepared dataset whose manifest is `doc`: refused if they are of another dataset."""
    scores = fsio.canonical_url(scores)
    try:
        summary = json.loads(fsio.read_bytes(fsio.join(scores, SCORE_SUMMARY)))
    except FileNotFoundError:
        raise InputError(
            f"--dcce-scores {scores}: no finished scores ({SCORE_SUMMARY} is written last); "
            "run (or finish) nmtpipe score"
        ) from None
    if summary["prepared"]["fingerprint"] != doc["fingerprint"]:
        raise InputError(
            f"--dcce-scores {scores}: scored {summary['prepared']['url']}, not this dataset "
            "(another fingerprint); run nmtpipe score on it"
        )
    return dcce.DcceScorer(
        dcce.DcceThreshold(dcce_min, scores, summary["forward"], summary["backward"])
    )


def _split(options: Mapping[str, Any]) -> SplitConfig:
    split = options["split"]
    return SplitConfig(
        **{
            **split,
            "carve": tuple(split["carve"]),
            "shards": tuple((name, n) for name, n in split["shards"]),
        }
    )


def _base_partial(stats: Mapping[str, Any], judged: set[str]) -> Partial:
    """The source's statistics that other thresholds leave as they are, as a partial:
    what was read, the rejects no scorer judged, conversions, length ratios."""

    def unjudged(rejects: Mapping[str, int]) -> dict[str, int]:
        return {reason: n for reason, n in rejects.items() if reason not in judged}

    inputs = {
        origin: {
            "read": info["read"],
            "rejects": unjudged(info["rejects"]),
            "encoding": {
                side: {name: 1 for name in found.split("/")}
                for side, found in info.get("encoding", {}).items()
            },
        }
        for origin, info in stats["inputs"].items()
    }
    return {
        "pairs_read": stats["pairs_read"],
        "rejects": unjudged(stats["rejects"]),
        "inputs": inputs,
        "converted": dict(stats.get("converted", {})),
        "ratio_hist": dict(stats.get("length_ratio_hist", {})),
    }


class RethresholdStep(BeamStep):
    """`nmtpipe rethreshold` as a step: planned from the source's manifest and
    statistics alone, its graph (`transforms/beam/rethreshold.py`), and the commit as
    `prepare` commits."""

    kind = KIND
    label = "Rethreshold"
    ours = OURS
    command = "rethreshold"
    dataset_report = True

    def __init__(
        self,
        source: str,
        output: str,
        changes: Mapping[str, Any],
        dcce_scores: tuple[str, float] | None = None,
    ) -> None:
        source, output = fsio.canonical_url(source), fsio.canonical_url(output)
        if source == output:
            raise ConfigError("--output: a new folder (the source is read while it is written)")
        _, doc = manifest.open_committed(source, KIND, "prepare")
        self.source_stats = read_stats(source, doc)
        options = copy.deepcopy(doc["options"])
        # Thresholds its trusted pairs set become options, as `prepare` would take them.
        options["quality"] = in_force(options["quality"], self.source_stats.get("calibrated", {}))
        if "trusted" in options:
            options["trusted"]["keep"] = 0.0
        scorers: list[LearnedScorer | dcce.DcceScorer] = []
        scorers += _learned_scorers(options["quality"], changes, source)
        options["quality"].pop(dcce.NAME, None)  # (a source judged by DCCE: not again unless asked)
        if dcce_scores is not None:
            model = model_scores(*dcce_scores, doc)
            scorers.append(model)
            options["quality"][dcce.NAME] = dataclasses.asdict(model.config)
        if not scorers:
            raise ConfigError(
                f"{source} has no learned scores to judge again (nor --dcce-scores given)"
            )
        learned = self.source_stats.get("learned")
        if learned is None:
            raise InputError(
                f"{source}: prepared before nmtpipe recorded what its scorers learned from "
                "(stats.json has no `learned`); prepare it again to rethreshold it"
            )
        for name, value in changes.items():
            options["quality"][thresholds_of()[name]][name] = value
        identities = tuple(
            {k: v for k, v in ident.items() if k != "encoding"} for ident in doc["inputs"]
        )
        split = _split(options)
        columns = tuple(c for scorer in scorers for c in scorer.COLUMNS)
        schema = pa.schema(
            [*PAIRS_SCHEMA, *(pa.field(PREFIX + column, pa.float32()) for column in columns)]
        )
        fingerprint = manifest.fingerprint(
            {"step": KIND, "code_version": doc["code_version"], "inputs": identities, **options}
        )
        self.prepared = Prepared(
            output=output,
            langs=(options["languages"]["src"], options["languages"]["tgt"]),
            shard_counts=dict(split.shards),
            count_buckets=options["count_buckets"],
            reject_shards=options["reject_shards"],
            pairs_schema=schema,
            fingerprint=fingerprint,
            identities=identities,
            options=options,
            code_version=doc["code_version"],
        )
        exempt = frozenset(i["origin"] for i in identities if i["role"] != "train")
        self.spec = RethresholdSpec(
            source=source,
            output=output,
            langs=self.prepared.langs,
            split=split,
            count_buckets=self.prepared.count_buckets,
            reject_shards=self.prepared.reject_shards,
            reject_files=tuple(doc["rejects"]["files"]),
            thresholds=Thresholds(
                scorers, {s.NAME: learned.get(s.NAME, 0) for s in scorers}, exempt
            ),
            columns=columns,
            dcce_scores=options["quality"].get(dcce.NAME, {}).get("scores"),
        )
        # (a source's DCCE rejects are judged again whether or not its scores are given)
        self.judged = {NEAR_DUPLICATE, dcce.NAME} | {r for s in scorers for r in s.REASONS}
        self.output, self.fingerprint = output, fingerprint
        self.code_version = doc["code_version"]  # the source's, as its fingerprint holds
        self.input_bytes = sum(f.get("size", 0) for f in doc["files"])
        self.spill: str | None = None

    def announce(self, runner: str, options: PipelineOptions) -> str:
        return f"judging {self.spec.source} again into {self.output} on {runner}"

    def graph(self, options: PipelineOptions, meter: Meter | None = None) -> Rethreshold:
        root = spill_root("auto", options, self.output)
        if root is not None:
            self.spill = fsio.join(root, f"nmtpipe-spill-{uuid.uuid4().hex}")
        return Rethreshold(self.spec, self.summary_url, self.spill)

    def release(self) -> None:
        if self.spill is not None:
            fsio.remove_tree(self.spill)

    def write(self, summary: dict[str, Any] | None, log: Log) -> Written:
        assert summary is not None
        partial = merge_into(_base_partial(self.source_stats, self.judged), summary["stats"])
        stats = finalize(partial, self.prepared.splits)
        stats["learned"] = dict(self.source_stats["learned"])
        for carried in ("learned_sample", "matched"):  # the scores kept are the sample's
            if self.source_stats.get(carried):
                stats[carried] = self.source_stats[carried]
        check_every_input_kept(stats)
        files = summary["files"]
        fill_empty(self.prepared, files)
        check_consistent(files, stats)
        return Written(files, stats)

    def card(self, files: list[dict[str, Any]]) -> str:
        return card(self.prepared, files)

    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        assert stats is not None
        return manifest_doc(self.prepared, files, stats)

    def figures(self, outcome: StepOutcome) -> str:
        splits = outcome.manifest["splits"]
        return ", ".join(f"{split} {info['pairs']:,}" for split, info in splits.items())


def run_rethreshold(
    source: str,
    output: str,
    changes: Mapping[str, Any],
    beam_args: list[str],
    dcce_scores: tuple[str, float] | None = None,
    **how: Any,
) -> StepOutcome:
    """Judge the prepared dataset `source` again with `changes` (threshold option →
    value) into `output`, and by DCCE where `dcce_scores` = (the folder of `nmtpipe
    score`, the least score kept); `how`: `run_steps`' force, replace, log and quiet."""
    step = functools.partial(RethresholdStep, source, output, changes, dcce_scores)
    return run_step(step, beam_args, **how)
