"""`nmtpipe run CONFIG`: the chain of stages from one config, given to the one runner.

The chain (`CHAIN`) is a list of stages (`steps/runner.py`), each a name and the steps
it plans from the config, wired under the root: prepare, vocab, encode, train, and
decode (the test split, then each `evaluate:` set). Every step is reused when its
output's manifest holds its result and rebuilt in place when an input or option changed
(`replace`); the trained model goes on from its checkpoints when only the options of its
training changed (`train.py`), and decoding follows. A new stage is its step's module
and one `register` line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from nmtpipe.pipelines.workflow.decode import DecodeStep
from nmtpipe.pipelines.workflow.encode import EncodeStep
from nmtpipe.pipelines.workflow.prepare import PrepareStep
from nmtpipe.pipelines.workflow.prepare_plan import make_plan
from nmtpipe.pipelines.workflow.report import write_report
from nmtpipe.pipelines.workflow.run_config import RunConfig
from nmtpipe.pipelines.workflow.steps.protocol import Evaluation, How
from nmtpipe.pipelines.workflow.steps.runner import Plan, Show, Stage, StageResult, run_stages
from nmtpipe.pipelines.workflow.train import TrainStep
from nmtpipe.pipelines.workflow.vocab import VocabStep
from nmtpipe.transforms.errors import OutputError
from nmtpipe.transforms.formats.prepared import read_prepared
from nmtpipe.transforms.storage import fsio

CHAIN: tuple[Stage, ...] = ()  # in the order they run


def register(stage: Stage, after: str | None = None) -> None:
    """Add `stage` to the chain after the stage named `after` (default: last)."""
    global CHAIN
    names = stage_names()
    if stage.name in names:
        raise ValueError(f"a stage {stage.name!r} is in the chain already")
    at = len(CHAIN) if after is None else names.index(after) + 1
    CHAIN = (*CHAIN[:at], stage, *CHAIN[at:])


def stage_names() -> list[str]:
    """The stages of the chain, in order (`--from`, `--until`)."""
    return [stage.name for stage in CHAIN]


def _prepare(config: RunConfig) -> list[Plan]:
    return [lambda: PrepareStep(make_plan(config.prepare))]


def _vocab(config: RunConfig) -> list[Plan]:
    return [lambda: VocabStep(config.vocab, [read_prepared(config.vocab.prepared)])]


def _encode(config: RunConfig) -> list[Plan]:
    return [lambda: EncodeStep(config.encode)]


def _no_old_records(config: RunConfig) -> None:
    """Refuse a root that an unreleased nmtpipe, before training and decoding had
    manifests, left with its records in `{root}/workflow/`: they are not read."""
    records = config.url("workflow")
    if fsio.exists(records):
        raise OutputError(
            f"{records} holds records of an unreleased nmtpipe, which this one does not "
            f"read: delete {records}; the next run then trains on from the checkpoints in "
            f"{config.train.save_dir} and decodes again"
        )


def _train(config: RunConfig) -> list[Plan]:
    _no_old_records(config)
    nproc = config.nproc.get("train", 1)
    return [lambda: TrainStep(config.train, nproc)]


def _decode(config: RunConfig) -> list[Plan]:
    """The test split, then each `evaluate:` set with the same options into
    `{root}/decoded/{name}/`."""
    _no_old_records(config)
    model, nproc = config.train.save_dir, config.nproc.get("decode", 1)
    sets = [(config.decode, None)] + [
        (dataclasses.replace(config.decode, inputs=s.inputs, references=s.references,
                             output=config.decoded(s.name)), s.name)
        for s in config.evaluate
    ]  # fmt: skip
    return [lambda job=job, name=name: DecodeStep(job, model, nproc, name) for job, name in sets]


register(Stage("prepare", _prepare))
register(Stage("vocab", _vocab))
register(Stage("encode", _encode))
register(Stage("train", _train))
register(Stage("decode", _decode))


def run_workflow(
    config: RunConfig,
    first: str | None = None,
    last: str | None = None,
    log: Callable[[str], None] = print,
    show: Show = lambda name, step, outcome: None,
    quiet: bool = True,
    rank_module: str | None = None,
) -> list[StageResult]:
    """Run the stages from `first` to `last` (default: all); stop at the first that
    fails (its result holds the error). `quiet` keeps local Beam workers and the torch
    jobs' progress off the terminal; `rank_module` is what each torchrun rank runs."""
    names = stage_names()
    chosen = names[names.index(first or names[0]) : names.index(last or names[-1]) + 1]
    how = How(config.beam, replace=True, log=log, quiet=quiet, rank_module=rank_module)
    return run_stages(CHAIN, config, how, chosen.__contains__, show)


def summary_table(results: list[StageResult]) -> str:
    rows = [("step", "status", "time", "result")]
    rows += [
        (r.name, r.status, f"{r.seconds:.1f} s" if r.seconds else "", r.figures) for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ).rstrip()


def evaluations(results: list[StageResult]) -> list[Evaluation]:
    """The test sets the run's steps scored, in order."""
    return [evaluation for result in results for evaluation in result.evaluations]


def places(results: list[StageResult], report: str | None) -> dict[str, str]:
    """Where a person finds what the run made, by what it is: the model, its learning
    curves, each test set's translations (from the steps, `Step.places`), and the
    dataset's `report`, in the order of the chain."""
    found = {what: url for result in results for what, url in result.places.items()}
    return found if report is None else {**found, "report": report}


def write_run_report(results: list[StageResult]) -> str | None:
    """The report of the furthest dataset the run's steps made or found (encoded, else
    prepared), written beside it; its URL, or None if the run went through none."""
    described = [outcome.output for r in results for step, outcome in r.done if step.dataset_report]
    return write_report(described[-1]) if described else None
