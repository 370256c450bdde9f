"""The one shape of a step on the driver (prepare, vocab, encode): plan, graph, commit.

A step supplies only what differs (`Step`):
- its **plan**, made by its constructor, which reads the inputs and builds nothing: the
  output, the kind of result and the fingerprint of the typed config and the inputs;
- its **graph**, the Beam transform that writes its files (None for a step whose work
  is the driver's, such as a vocabulary);
- its **commit**: the files written (`write`, from the pipeline's summary), the dataset
  card, and the manifest. The tail every step shares — `stats.json`, the card, the
  manifest written last — is written once, here (`_commit`).

`run_steps` does the rest, the same for every step: Beam's options checked first, so
that a typo fails before any work; each committed result reused when it holds exactly
this one (`transforms/storage/commit.py`); the graphs of the others run as one pipeline
(one job on a remote runner); each committed; one `StepOutcome` each. A failure leaves
nothing uncommitted behind (`commit.building`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmtpipe.pipelines.beam.options import describe, pipeline_options, run_branches, runs_locally
from nmtpipe.transforms.formats.dataset_card import write_card
from nmtpipe.transforms.formats.step_summary import read_summary
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.commit import (
    STAGING,
    StepOutcome,
    building,
    commit,
    reuse_committed,
)
from nmtpipe.transforms.storage.manifest import STATS_FILE, file_entry
from nmtpipe.transforms.storage.read_meter import Meter

if TYPE_CHECKING:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

Log = Callable[[str], None]
IN_PROCESS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


@dataclass(frozen=True)
class Running:
    """How the steps of one call run: Beam's arguments and options, whether local
    workers keep off the terminal, and where to say what a user should know."""

    beam_args: list[str]
    options: PipelineOptions
    quiet: bool
    log: Log


@dataclass
class Written:
    """What a step's files came to, before the common tail: their manifest entries and
    the statistics (None: the step keeps no `stats.json`)."""

    files: list[dict[str, Any]]
    stats: dict[str, Any] | None


class Step(ABC):
    """One step's output, planned by the constructor (the inputs read, nothing built)."""

    output: str
    kind: str
    fingerprint: str
    ours: re.Pattern[str]  # the files the step's commit owns in its output
    label = "Step"  # the pipeline's label for its graphs
    input_bytes = 0  # what its work reads (picks the local runner's mode)
    cores_per_worker = 1  # the cores one worker of its graph keeps busy

    @functools.cached_property
    def summary_url(self) -> str:
        """Where its graph leaves the summary of what it wrote (one per run)."""
        return fsio.join(self.output, STAGING, f"summary-{uuid.uuid4().hex}.json")

    def graph(self, options: PipelineOptions, meter: Meter | None = None) -> beam.PTransform | None:
        """The Beam graph that writes the step's files and `summary_url`, its readers
        counting the input they read into `meter` (the progress shown); None where the
        driver does the work, in `write`."""
        return None

    @abstractmethod
    def announce(self, runner: str, options: PipelineOptions) -> str:
        """The line said before the work starts."""

    @abstractmethod
    def write(self, summary: dict[str, Any] | None, running: Running) -> Written:
        """The step's own part of the commit, after its graph ran (`summary`: what the
        graph wrote; None without a graph): checked, completed, its statistics."""

    def card(self, files: list[dict[str, Any]]) -> str | None:
        """The dataset card (`README.md`) of the output; None: none."""
        return None

    @abstractmethod
    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        """The manifest document, committed last."""

    def release(self) -> None:  # noqa: B027 (most steps leave nothing)
        """Remove what the graph left on its way (spilled batches), run or failed."""


Committed = tuple[dict[str, Any], dict[str, Any]]  # the manifest and the statistics


def commit_step(step: Step, summary: dict[str, Any] | None, running: Running) -> Committed:
    """The step's files written, then the tail every step shares: `stats.json`, the
    card, and the manifest, written last, which commits the output."""
    written = step.write(summary, running)
    files, stats, out = written.files, written.stats, step.output
    if stats is not None:
        text = json.dumps(stats, indent=2, sort_keys=True).encode() + b"\n"
        written = fsio.write_bytes(fsio.join(out, STATS_FILE), text)
        files.append(file_entry(out, written, "stats", 1))
    card = step.card(files)
    if card is not None:
        files.append(write_card(out, card))
    return commit(out, step.kind, step.manifest(files, stats), step.ours), stats or {}


def _reuse(step: Step, force: bool, replace: bool, log: Log) -> Committed | None:
    """The committed manifest and statistics if the output holds exactly this result
    (never with `force`; another result is replaced only with `replace`), else None."""
    committed = reuse_committed(step.output, step.kind, step.fingerprint, force, log, replace)
    if committed is None:
        return None
    if committed.get("stats") != STATS_FILE:
        return committed, {}
    return committed, json.loads(fsio.read_bytes(fsio.join(step.output, STATS_FILE)))


def _build(
    todo: list[Step], beam_args: list[str], log: Log, quiet: bool, in_process: bool
) -> tuple[list[Committed], str]:
    """Run the graphs of `todo` as one pipeline (in this process if `in_process`), then
    commit each; their commits and the runner's description."""
    size = sum(step.input_bytes for step in todo)
    cores = max(step.cores_per_worker for step in todo)
    if in_process:
        beam_args = [*beam_args, *IN_PROCESS]
    options = pipeline_options(beam_args, size, cores_per_worker=cores)
    meter = Meter(fsio.join(todo[0].output, STAGING, f"read-{uuid.uuid4().hex}"), size)
    graphs = [step.graph(options, meter) for step in todo]
    runner = describe(options, size) if any(graphs) else "the driver"
    for step in todo:
        log(step.announce(runner, options))
    try:
        if any(graphs):
            branches = [g for g in graphs if g is not None]
            run_branches(options, todo[0].label, branches, quiet, meter)
    finally:
        for step in todo:
            step.release()
    running = Running(beam_args, options, quiet, log)
    commits = [
        commit_step(step, None if graph is None else read_summary(step.summary_url), running)
        for step, graph in zip(todo, graphs, strict=True)
    ]
    return commits, runner


def run_steps(
    plans: Sequence[Callable[[], Step]],
    beam_args: list[str],
    force: bool = False,
    replace: bool = False,
    log: Log = lambda _: None,
    quiet: bool = False,
    in_process_bytes: int | None = None,
) -> list[StepOutcome]:
    """The steps `plans` make, each reused if its output holds its result, the others'
    graphs run as one pipeline (so none may read another's output) and each committed.
    `quiet` keeps local Beam workers off the terminal (`run_pipeline`); on a local
    runner, work of up to `in_process_bytes` runs in this process, whatever mode the
    Beam options name (a refresh's small change)."""
    started = time.perf_counter()
    local = runs_locally(pipeline_options(beam_args))  # fails early on bad Beam options
    steps = [plan() for plan in plans]
    with contextlib.ExitStack() as failing:  # a failure leaves no output it began
        for step in steps:
            failing.enter_context(building(step.output, step.ours))
        reused = [_reuse(step, force, replace, log) for step in steps]
        todo = [step for step, done in zip(steps, reused, strict=True) if done is None]
        built = iter(())
        runner = "cached"
        if todo:
            size = sum(step.input_bytes for step in todo)
            small = in_process_bytes is not None and size <= in_process_bytes
            commits, runner = _build(todo, beam_args, log, quiet, local and small)
            built = iter(commits)
    seconds = time.perf_counter() - started
    outcomes = []
    for step, done in zip(steps, reused, strict=True):
        cached = done is not None
        committed, stats = done if cached else next(built)
        outcomes.append(StepOutcome(step.output, cached, committed, stats, seconds,
                                    "cached" if cached else runner))  # fmt: skip
    return outcomes


def run_step(plan: Callable[[], Step], beam_args: list[str], **how: Any) -> StepOutcome:
    """One step: `run_steps` of one; `how`: its force, replace, log and quiet."""
    (outcome,) = run_steps([plan], beam_args, **how)
    return outcome
