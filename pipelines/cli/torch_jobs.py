"""What `nmtpipe train`, `decode` and `score` share on the command line: the job on
`--nproc` processes (or on this torchrun rank), its result shown once; and what the
commands given a checkpoint share (decode, translate, export, score): a folder for it."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.rank import RANK_MODULE
from nmtpipe.trainers.runtime.run_files import BEST, checkpoint_file
from nmtpipe.trainers.train.launch import Job, finish, is_main_rank, run_job
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.commit import StepOutcome

C = TypeVar("C")


def with_checkpoint_file(config: C) -> C:
    """`config` with its --checkpoint a file: a folder given for it (a --save-dir)
    means the best checkpoint in it, said in a line; one without is a usage error."""
    given = getattr(config, "checkpoint", None)
    if given is None:
        return config
    found = checkpoint_file(given)
    if found != given:
        logs.progress(f"--checkpoint {given} is a folder: using {found}")
    return dataclasses.replace(config, checkpoint=found)  # type: ignore[type-var]


def run_checkpoint(url: str, option: str) -> str:
    """The checkpoint a --forward or --backward names: a file, a --save-dir (its best
    checkpoint) or the root of `nmtpipe run` (its `checkpoints/`), said in a line when
    it is a folder."""
    found = url
    if fsio.is_folder(url) and not fsio.exists(fsio.join(url, BEST)):
        under = fsio.join(url, "checkpoints")
        found = under if fsio.is_folder(under) else url
    found = checkpoint_file(found, option)
    if found != url:
        logs.progress(f"{option} {url} is a folder: using {found}")
    return found


def add_nproc(group: argparse._ArgumentGroup) -> None:
    """--nproc: the job's processes on this machine (not part of its config)."""
    group.add_argument(
        "--nproc",
        type=int,
        default=1,
        metavar="N",
        help="processes on this machine (torchrun --standalone when above 1)",
    )


def run_torch_job(
    config: Job, args: argparse.Namespace, report: Callable[[dict[str, Any]], str]
) -> int:
    """With --nproc N the job runs on N processes under torchrun; under torchrun (a
    multi-node job) each rank does its share, and the first shows the result: its
    summary, and `report` of it."""
    summary = run_job(config, args.nproc, args.verbose, rank_module=RANK_MODULE)
    if is_main_rank():
        logs.show(args, logs.Shown(summary, report(summary)))
    return finish()


def shown_step(
    outcome: StepOutcome, report: Callable[[dict[str, Any]], str], what: str
) -> logs.Shown:
    """A torch step's outcome in `run` or `refresh`: the job's summary, and its `report`
    after a line saying that the output held this `what` already, if it did."""
    head = [logs.outcome_head(outcome, what, "")] if outcome.cached else []
    return logs.Shown(outcome.stats, "\n".join([*head, report(outcome.stats)]))
