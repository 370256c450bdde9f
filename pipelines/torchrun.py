"""Running a torch step on several processes: `--nproc N` re-runs the command under
`torchrun --standalone`, and a rank's exit that torchrun does not mistake for a crash."""

from __future__ import annotations

import os
import subprocess
import sys


def wants_relaunch(nproc: int) -> bool:
    """True when the command should start torchrun instead of running itself."""
    return nproc > 1 and "LOCAL_RANK" not in os.environ


def relaunch(nproc: int, argv: list[str]) -> int:
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
