"""The one runner of steps, whatever does their work.

`run_steps` takes the plans of a call's steps: Beam's options are checked first, so that
a typo fails before any work; each step is planned, and reused when its output holds
exactly its result (`protocol.reused`); the others are built by their engines (the Beam
graphs of the call as one pipeline, torch jobs one after another) and committed, each
with one `StepOutcome`. `run_stages` runs named stages of steps in order, each planned
from a config when its turn comes (so a stage reads what the one before committed), and
stops at the first that fails: `nmtpipe run`'s chain, refresh's training and decoding.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nmtpipe.pipelines.workflow.steps.beam_steps import check_options
from nmtpipe.pipelines.workflow.steps.protocol import (
    Committed,
    Engine,
    Evaluation,
    How,
    Step,
    commit_step,
    reused,
)
from nmtpipe.transforms.storage.commit import StepOutcome

Plan = Callable[[], Step]


def run_planned(plans: Sequence[Plan], how: How) -> list[tuple[Step, StepOutcome]]:
    """The steps `plans` make, each with its outcome: reused if its output holds its
    result, else built by its engine (the steps of one engine together) and committed."""
    started = time.perf_counter()
    check_options(how.beam_args)
    steps = [plan() for plan in plans]
    outcomes: dict[int, StepOutcome] = {}

    def done(index: int, committed: Committed, runner: str) -> None:
        step = steps[index]
        cached = runner == "cached"
        seconds = time.perf_counter() - started
        outcomes[index] = StepOutcome(step.output, cached, *committed, seconds, runner)
        how.done(step, outcomes[index])

    todo: dict[Engine, list[int]] = {}
    with contextlib.ExitStack() as failing:  # what a failure leaves of each step's work
        for step in steps:
            failing.enter_context(step.building())
        for index, step in enumerate(steps):
            kept = reused(step, how)
            if kept is None:
                todo.setdefault(step.engine, []).append(index)
            else:
                done(index, kept, "cached")
        for engine, indexes in todo.items():
            # closed at once if a commit fails: the engine cleans up before the error is told
            with contextlib.closing(engine.build([steps[i] for i in indexes], how)) as built:
                for index, (written, runner) in zip(indexes, built, strict=True):
                    done(index, commit_step(steps[index], written), runner)
    return [(step, outcomes[index]) for index, step in enumerate(steps)]


def run_steps(plans: Sequence[Plan], beam_args: list[str], **how: Any) -> list[StepOutcome]:
    """`run_planned` with `how`'s fields as keywords (force, replace, log, quiet,
    in_process_bytes, rank_module); the outcomes, in the order of `plans`."""
    return [outcome for _, outcome in run_planned(plans, How(tuple(beam_args), **how))]


def run_step(plan: Plan, beam_args: list[str], **how: Any) -> StepOutcome:
    """One step: `run_steps` of one."""
    (outcome,) = run_steps([plan], beam_args, **how)
    return outcome


@dataclass(frozen=True)
class Stage:
    """A named group of steps, planned together from a config when its turn comes: a
    row of `nmtpipe run`'s table."""

    name: str
    plans: Callable[[Any], list[Plan]]


@dataclass
class StageResult:
    name: str
    status: str  # ran, cached, failed, skipped
    seconds: float = 0.0
    done: list[tuple[Step, StepOutcome]] = field(default_factory=list)
    error: Exception | None = None  # why it failed

    @property
    def figures(self) -> str:
        """The key figures of its steps' outputs."""
        return "; ".join(filter(None, (step.figures(outcome) for step, outcome in self.done)))

    @property
    def evaluations(self) -> list[Evaluation]:
        """The test sets its steps scored."""
        found = (step.evaluation(outcome) for step, outcome in self.done)
        return [evaluation for evaluation in found if evaluation is not None]

    @property
    def places(self) -> dict[str, str]:
        """What a person looks for in its steps' outputs, by what it is (`Step.places`)."""
        return {
            what: url for step, outcome in self.done for what, url in step.places(outcome).items()
        }


Show = Callable[[str, Step, StepOutcome], None]  # a stage's name, a step, its outcome


def _telling(how: How, stage: str, show: Show) -> How:
    """`how`, its outcomes shown as the stage's."""
    return dataclasses.replace(how, done=lambda step, outcome: show(stage, step, outcome))


def run_stages(
    stages: Sequence[Stage],
    config: Any,
    how: How,
    chosen: Callable[[str], bool] = lambda name: True,
    show: Show = lambda name, step, outcome: None,
) -> list[StageResult]:
    """Each stage `chosen` (the others are skipped), in order, its steps planned from
    `config` and given to `run_planned`; stop at the first that fails (its result holds
    the error). `show` is told each outcome as it comes."""
    results = []
    for stage in stages:
        if not chosen(stage.name):
            results.append(StageResult(stage.name, "skipped"))
            continue
        how.log(f"== {stage.name}")
        started = time.perf_counter()
        try:
            done = run_planned(stage.plans(config), _telling(how, stage.name, show))
        except Exception as error:
            seconds = time.perf_counter() - started
            results.append(StageResult(stage.name, "failed", seconds, error=error))
            break
        status = "cached" if all(outcome.cached for _, outcome in done) else "ran"
        results.append(StageResult(stage.name, status, time.perf_counter() - started, done))
    return results
