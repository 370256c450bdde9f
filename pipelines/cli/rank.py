"""Each torchrun rank of a job that `nmtpipe train` or `decode` (or `run`, `refresh`)
starts on several processes (`--nproc N`): a process of its own, `python -m
nmtpipe.pipelines.cli.rank FILE`, that runs its share of the job and shows what the
command line would: the progress display the starting command installed. A failure is
recorded for the starting command, which tells the job's one line once every rank has
ended (`trainers/train/launch.py`); with --verbose the rank prints its traceback too.
"""

from __future__ import annotations

import signal
import sys
import traceback
from types import FrameType

from nmtpipe.trainers.train.launch import finish, read_job, record_failure, run_here
from nmtpipe.transforms import progress

# What `run_job(..., rank_module=RANK_MODULE)` starts in each rank.
RANK_MODULE = __name__


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """The first SIGINT (torchrun's, on Ctrl-C) stops the job; later ones would break
    the rank's recording of what it kept."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(payload: str) -> int:
    job = read_job(payload)
    progress.install(job.display)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        run_here(job.config)
    except BaseException as exc:  # (a KeyboardInterrupt is an Interrupted by now)
        if job.verbose:
            traceback.print_exception(exc)
        record_failure(job, exc)
        return finish(1)
    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
