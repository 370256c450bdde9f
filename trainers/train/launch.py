"""Running a torch job (a `Job`: training's or decoding's config): in this process, or
on N processes of this machine under `torchrun --standalone` (`--nproc N`).

Ranks receive the job's checked config, pickled to a local file each of them reads
(`read_job`), not a command line to parse again. The module each rank runs is the
caller's (`rank_module`: the command line's prints a rank's failure as its one line,
`pipelines/cli/rank.py`), and so is the progress display the file carries to them.
The job's result is read back from where the first rank committed it (its
`summary_file`: `train_summary.json`, `scores.json`).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from signal import SIGTERM
from typing import Any, ClassVar, Protocol

from nmtpipe.transforms import progress
from nmtpipe.transforms.errors import NmtpipeError
from nmtpipe.transforms.storage import fsio


class Job(Protocol):
    """What launching a job needs of its config, so that this module knows no job's kind
    (TrainConfig and DecodeConfig are jobs). A job is pickled to the ranks it runs on."""

    name: ClassVar[str]  # what messages call it: "train", "decode"
    summary_file: ClassVar[str]  # in `output`: the job's result, committed last

    @property
    def output(self) -> str:
        """The folder the job writes."""

    @property
    def rerun(self) -> str:
        """What re-running the same command does ("decodes again"), told when it fails."""

    def run(self) -> dict[str, Any]:
        """Run the job in this process (this rank's share under torchrun); its summary.
        Its torch code is imported here, not with the config, which is read before any
        job starts."""


@dataclass
class RankJob:
    """What each rank of a job on several processes reads from its file."""

    config: Job
    verbose: bool
    display: progress.Display  # the starting process's, so the ranks show as it does


def run_job(
    config: Job,
    nproc: int = 1,
    verbose: bool = False,
    rank_module: str | None = None,
) -> dict[str, Any]:
    """Run the job `config` describes on `nproc` local processes; its summary.

    In this process when `nproc` is 1 or when this process is already a torchrun rank
    (the job then spans the ranks torchrun started). On several processes, each runs
    `python -m {rank_module} FILE`, which reads its job (`read_job`), runs it
    (`run_here`), shows its failure and ends (`finish`). A job that fails leaves no
    output folder it made empty (`fsio.output_folder`)."""
    with fsio.output_folder(config.output):
        if nproc <= 1 or "LOCAL_RANK" in os.environ:
            return run_here(config)
        if rank_module is None:
            raise ValueError(f"{config.name} on {nproc} processes needs a rank_module")
        with tempfile.TemporaryDirectory(prefix="nmtpipe-job-") as folder:
            payload = os.path.join(folder, "job.pickle")
            failure = os.path.join(folder, "failure.json")
            with open(payload, "wb") as f:
                pickle.dump(RankJob(config, verbose, progress.installed()), f)
            torchrun = [sys.executable, "-m", __name__, "--torchrun", failure, str(verbose)]
            ranks = ["--standalone", f"--nproc_per_node={nproc}", "-m", rank_module, payload]
            # One thread per rank unless the user says otherwise (torchrun's own default,
            # set here so that it does not print a banner about it).
            env = {"OMP_NUM_THREADS": "1", **os.environ}
            code = subprocess.run([*torchrun, *ranks], check=False, env=env).returncode
            if code != 0:
                died = json.loads(Path(failure).read_text()) if os.path.exists(failure) else None
                raise NmtpipeError(failure_line(config, nproc, code, died))
        return result_of(config)


def failure_line(config: Job, nproc: int, code: int, died: dict[str, Any] | None) -> str:
    """What a user reads when a job on several processes fails: which rank, how, and
    what re-running does (training resumes from its last checkpoint)."""
    again = _again(config)
    if died is None:
        return f"{config.name} failed on {nproc} processes (torchrun exit {code}); {again}"
    how = (
        f"killed by {died['signal']}"
        if died["signal"]
        else f"exit {died['exitcode']}; its error is above"
    )
    return f"rank {died['rank']} of {nproc} died ({how}); {again}"


def _torchrun(failure: str, verbose: bool, argv: list[str]) -> int:
    """torchrun in this process, its multi-page report of a dead rank replaced by a
    record of the first failure (`failure`, JSON) for `run_job`'s one line. The ranks
    inherit this process's terminal, so their progress bars stay bars."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    if not verbose:
        logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    try:
        run(parse_args(argv))
    except ChildFailedError as e:
        # A rank killed by a signal is the cause; the others then fail on their broken
        # connections, and may have recorded that earlier than torchrun saw the kill, or
        # get the SIGTERM torchrun sends the survivors: that one is never the cause.
        signalled = sorted(r for r, f in e.failures.items() if f.exitcode < 0)
        killed = [r for r in signalled if e.failures[r].exitcode != -SIGTERM] or signalled
        rank, first = (killed[0], e.failures[killed[0]]) if killed else e.get_first_failure()
        signal = first.signal_name() if first.exitcode < 0 else ""
        record = {"rank": rank, "exitcode": first.exitcode, "signal": signal}
        with open(failure, "w") as f:
            json.dump(record, f)
        return 1
    return 0


def _again(config: Job) -> str:
    return f"re-running the same command {config.rerun}"


def read_job(payload: str) -> RankJob:
    """The job a rank's file holds (written by `run_job`)."""
    with open(payload, "rb") as f:
        return pickle.load(f)


def run_here(config: Job) -> dict[str, Any]:
    """Run the job in this process (on this rank's share, under torchrun)."""
    from nmtpipe.trainers.runtime.distributed import peer_failure

    try:
        return config.run()
    except RuntimeError as exc:
        # Another rank gone (on another machine, its torchrun cannot say which or why),
        # or the ranks never connected: the network's word for it, not an internal error.
        lost = peer_failure(exc)
        if lost is None:
            raise
        if "connectFullMesh" in lost:
            raise NmtpipeError(
                f"the ranks of this job could not connect to each other ({lost}); on a "
                "machine whose hostname resolves to a loopback address, set "
                "GLOO_SOCKET_IFNAME to the network interface the other machines reach"
            ) from exc
        raise NmtpipeError(
            f"lost the connection to another rank of the job ({lost}); its machine's log "
            f"says why it stopped; {_again(config)}"
        ) from exc


def result_of(config: Job) -> dict[str, Any]:
    """The summary a finished job committed."""
    return json.loads(fsio.read_bytes(fsio.join(config.output, config.summary_file)))


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


if __name__ == "__main__" and sys.argv[1] == "--torchrun":
    sys.exit(_torchrun(sys.argv[2], sys.argv[3] == "True", sys.argv[4:]))
