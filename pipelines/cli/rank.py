"""Each torchrun rank of a job that `nmtpipe train` or `decode` (or `run`, `refresh`)
starts on several processes (`--nproc N`): a process of its own, `python -m
nmtpipe.pipelines.cli.rank FILE`, that runs its share of the job and shows what the
command line would: the progress display the starting command installed, and on failure
its one error line (`logs.error_line`). torchrun then reports the job's end to that
command as one line of its own (`trainers/train/launch.py`).
"""

from __future__ import annotations

import sys

from nmtpipe.pipelines.cli.logs import error_line
from nmtpipe.trainers.train.launch import finish, read_job, run_here
from nmtpipe.transforms import progress

# What `run_job(..., rank_module=RANK_MODULE)` starts in each rank.
RANK_MODULE = __name__


def main(payload: str) -> int:
    job = read_job(payload)
    progress.install(job.display)
    try:
        run_here(job.config)
    except Exception as exc:
        line, code = error_line(job.config.name, exc, job.verbose)
        print(line, file=sys.stderr, flush=True)
        return code
    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
