"""Running a torch step on several processes: `--nproc N` re-runs the command under
`torchrun --standalone`, and a rank's exit that torchrun does not mistake for a crash."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from transforms.errors import ConfigError


def relaunched(args: argparse.Namespace, beam_args: list[str]) -> int | None:
    """For a torch step: refuse Beam options, and with `--nproc N` (N > 1, not yet under
    torchrun) run the command under torchrun and return its exit code; else None."""
    if beam_args:
        raise ConfigError(f"unknown option(s): {' '.join(beam_args)}")
    if args.nproc > 1 and "LOCAL_RANK" not in os.environ:
        return _relaunch(args.nproc, args.argv)
    return None


def _relaunch(nproc: int, argv: list[str]) -> int:
    """Run `nmtpipe argv` again under `torchrun --standalone`, without --nproc."""
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            rest.append(arg)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", "-m", "pipelines.cli", *rest]  # fmt: skip
    return subprocess.run(cmd, check=False).returncode


def is_main_rank() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def finish() -> int:
    """End a rank whose work is written and whose process group is gone. Under torchrun,
    skip the interpreter's teardown, where gloo's threads sometimes abort the process
    ("terminate called without an active exception"), which torchrun would report as a
    failed job."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
