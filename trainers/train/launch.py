"""Running a torch job (a `Job`: training's or decoding's config): in this process, or
on N processes of this machine under `torchrun --standalone` (`--nproc N`).

Ranks receive the job's checked config, pickled to a local file each of them reads
(`read_job`), not a command line to parse again. The module each rank runs is the
caller's (`rank_module`: the command line's prints a rank's failure as its one line,
`pipelines/cli/rank.py`), and so is the progress display the file carries to them.
The job's result is read back from where the first rank committed it (its
`summary_file`: `train_summary.json`, `scores.json`).

A job on several processes fails, or is interrupted, in one line: each rank records
its error in the job's folder instead of printing it (`record_failure`), and the
launcher, once torchrun and every rank have ended, tells the cause (`job_failure`): an
interruption with what it kept, a rank killed by a signal, a rank's own error, before
the errors of the ranks that only lost it. Ctrl-C reaches torchrun and the launcher
(the terminal signals its foreground process group); torchrun stops the ranks, which
are in sessions of their own, and the launcher waits for it, so that nothing prints
after the command has returned.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from nmtpipe.transforms import progress
from nmtpipe.transforms.errors import (
    Interrupted,
    NmtpipeError,
    RankLost,
    error_class,
    find_user_error,
)
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
    folder: str  # the job's local folder, where a failing rank records its error


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
            with open(payload, "wb") as f:
                pickle.dump(RankJob(config, verbose, progress.installed(), folder), f)
            torchrun = [sys.executable, "-m", __name__, "--torchrun", folder, str(verbose)]
            ranks = ["--standalone", f"--nproc_per_node={nproc}", "-m", rank_module, payload]
            # One thread per rank unless the user says otherwise (torchrun's own default,
            # set here so that it does not print a banner about it).
            env = {"OMP_NUM_THREADS": "1", **os.environ}
            with _interrupts_wait() as interrupted:
                code = subprocess.run([*torchrun, *ranks], check=False, env=env).returncode
            if code != 0:
                raise job_failure(config, nproc, code, folder, interrupted())
        return result_of(config)


@contextlib.contextmanager
def _interrupts_wait() -> Iterator[Any]:
    """Ctrl-C, while torchrun runs, is torchrun's to act on (it stops the ranks and
    ends), not a KeyboardInterrupt that would leave this process and let the prompt
    return before the ranks are gone; yields whether one came."""
    came = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield came.is_set
        return
    before = signal.signal(signal.SIGINT, lambda *_: came.set())
    try:
        yield came.is_set
    finally:
        signal.signal(signal.SIGINT, before)


_TORCHRUN_RECORD = "torchrun.json"  # how torchrun saw the job end


def job_failure(
    config: Job, nproc: int, code: int, folder: str, interrupted: bool = False
) -> NmtpipeError:
    """The one error of a job on several processes that failed: an interruption (with
    what the rank that knows said it kept), a rank killed by a signal, a rank's own
    error, the error of a rank that lost another, or torchrun's exit code."""
    records = []
    for path in sorted(Path(folder).glob("failure-*.json")):
        records.append(json.loads(path.read_text()))
    records.sort(key=lambda r: r["rank"])
    died = _read(os.path.join(folder, _TORCHRUN_RECORD))
    stopped = [r for r in records if r["error"] == Interrupted.__name__]
    if stopped or interrupted or (died or {}).get("interrupted"):
        said = stopped[0]["message"] if stopped else f"interrupted; {_again(config)}"
        return Interrupted(said)
    causes = [r for r in records if r["error"] != RankLost.__name__]
    # torchrun sends SIGTERM to the ranks left when one fails: a rank's own error then
    # outranks it; any other signal, or a SIGTERM no rank explains, is the cause.
    signal_name = (died or {}).get("signal")
    if signal_name and not (signal_name == "SIGTERM" and causes):
        return NmtpipeError(failure_line(config, nproc, code, died))
    if causes or records:
        return _rank_error((causes or records)[0], nproc)
    return NmtpipeError(failure_line(config, nproc, code, died))


def _read(path: str) -> dict[str, Any] | None:
    return json.loads(Path(path).read_text()) if os.path.exists(path) else None


def _rank_error(record: dict[str, Any], nproc: int) -> NmtpipeError:
    """The error a rank recorded, of its own class; an unexpected one says which rank."""
    cls = error_class(record["error"]) if record["error"] else None
    if cls is not None:
        return cls(record["message"])
    return NmtpipeError(
        f"rank {record['rank']} of {nproc} failed: internal error: {record['message']} "
        "(run with --verbose for the traceback)"
    )


def record_failure(job: RankJob, exc: BaseException) -> None:
    """Record why this rank failed, in the job's folder, for the launcher's one line."""
    error = find_user_error(exc)
    if isinstance(exc, KeyboardInterrupt):  # one that came after the job's own handling
        error = Interrupted(f"interrupted; {_again(job.config)}")
    if error is not None:
        record = {"error": type(error).__name__, "message": str(error)}
    else:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else ""
        record = {"error": None, "message": f"{type(exc).__name__}: {first}"}
    rank = int(os.environ.get("RANK", "0"))
    path = os.path.join(job.folder, f"failure-{rank}.json")
    Path(path).write_text(json.dumps({"rank": rank, **record}))


def failure_line(config: Job, nproc: int, code: int, died: dict[str, Any] | None) -> str:
    """What a user reads when a job on several processes fails and no rank said why:
    which rank, how, and what re-running does (training resumes from its last
    checkpoint)."""
    again = _again(config)
    if died is None:
        return f"{config.name} failed on {nproc} processes (torchrun exit {code}); {again}"
    how = f"killed by {died['signal']}" if died["signal"] else f"exit {died['exitcode']}"
    return f"rank {died['rank']} of {nproc} died ({how}); {again}"


def _torchrun(folder: str, verbose: bool, argv: list[str]) -> int:
    """torchrun in this process, its multi-page report of a dead rank replaced by a
    record of the first failure (`folder/torchrun.json`) for `run_job`'s one line, its
    own traceback on Ctrl-C by a record of the interruption, once the ranks are gone.
    The ranks inherit this process's terminal, so their progress bars stay bars."""
    import logging

    if not verbose:  # the level torchrun's own loggers take when they are made
        os.environ["LOGLEVEL"] = "CRITICAL"
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    if not verbose:  # (and the plain ones below it, which take their parent's)
        logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)

    record: dict[str, Any]
    try:
        run(parse_args(argv))
        return 0
    except (SignalException, KeyboardInterrupt):  # torchrun has stopped the ranks
        record = {"interrupted": True}
    except ChildFailedError as e:
        # A rank killed by a signal is the cause; the others then fail on their broken
        # connections, and may have recorded that earlier than torchrun saw the kill, or
        # get the SIGTERM torchrun sends the survivors: that one is never the cause.
        signalled = sorted(r for r, f in e.failures.items() if f.exitcode < 0)
        killed = [r for r in signalled if e.failures[r].exitcode != -signal.SIGTERM] or signalled
        rank, first = (killed[0], e.failures[killed[0]]) if killed else e.get_first_failure()
        name = first.signal_name() if first.exitcode < 0 else ""
        record = {"rank": rank, "exitcode": first.exitcode, "signal": name}
    with open(os.path.join(folder, _TORCHRUN_RECORD), "w") as f:
        json.dump(record, f)
    return 1


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
    except KeyboardInterrupt:
        # (a job that knows better says what it kept, as an Interrupted of its own)
        raise Interrupted(f"interrupted; {_again(config)}") from None
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
        raise RankLost(
            f"lost the connection to another rank of the job ({lost}); its machine's log "
            f"says why it stopped; {_again(config)}"
        ) from exc


def result_of(config: Job) -> dict[str, Any]:
    """The summary a finished job committed."""
    return json.loads(fsio.read_bytes(fsio.join(config.output, config.summary_file)))


def is_main_rank() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def finish(code: int = 0) -> int:
    """End a rank whose work is written (or whose failure is recorded) and whose process
    group is gone, with `code`. Under torchrun, skip the interpreter's teardown, where
    gloo's threads sometimes abort the process ("terminate called without an active
    exception"), which torchrun would report as a failed job."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__" and sys.argv[1] == "--torchrun":
    sys.exit(_torchrun(sys.argv[2], sys.argv[3] == "True", sys.argv[4:]))
