"""What `nmtpipe train` and `nmtpipe decode` share on the command line: the job on
`--nproc` processes (or on this torchrun rank), its result shown once."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.rank import RANK_MODULE
from nmtpipe.trainers.train.launch import Job, finish, is_main_rank, run_job


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
    config: Job, args: argparse.Namespace, shown: Callable[[dict[str, Any]], logs.Shown]
) -> int:
    """With --nproc N the job runs on N processes under torchrun; under torchrun (a
    multi-node job) each rank does its share, and the first shows the result."""
    summary = run_job(config, args.nproc, args.verbose, rank_module=RANK_MODULE)
    if is_main_rank():
        logs.show(args, shown(summary))
    return finish()
