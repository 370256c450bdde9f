"""Launching a job of any kind, and the one line for a failed torchrun job: the rank that
was killed, not its victims."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from torch.distributed import DistBackendError
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from nmtpipe.trainers.train import launch
from nmtpipe.transforms.errors import ConfigError, Interrupted, NmtpipeError, RankLost
from nmtpipe.transforms.storage import fsio


@dataclass(frozen=True)
class CountJob:
    """A job of neither kind nmtpipe has: it commits a count, as a job commits its summary."""

    output: str
    count: int

    name: ClassVar[str] = "count"
    summary_file: ClassVar[str] = "count.json"
    rerun: ClassVar[str] = "counts again"

    def run(self) -> dict[str, Any]:
        summary = {"count": self.count}
        fsio.write_bytes(fsio.join(self.output, self.summary_file), json.dumps(summary).encode())
        return summary


class LostJob(CountJob):
    """A count whose rank loses another: gloo's error as a rank sees it."""

    def run(self) -> dict[str, Any]:
        raise RuntimeError("[/gloo/transport/tcp/pair.cc:553] Connection closed by peer [::1]:7")


def test_launch_runs_a_job_of_any_kind(tmp_path):
    job = CountJob(str(tmp_path / "out"), 3)
    assert launch.run_job(job) == {"count": 3}
    assert launch.result_of(job) == {"count": 3}
    assert launch.failure_line(job, 2, 1, None) == (
        "count failed on 2 processes (torchrun exit 1); re-running the same command counts again"
    )
    with pytest.raises(ValueError, match="count on 2 processes needs a rank_module"):
        launch.run_job(job, nproc=2)


class NcclLostJob(CountJob):
    """A count whose rank loses another under NCCL: the collective it waits for times out."""

    def run(self) -> dict[str, Any]:
        raise DistBackendError(
            "[PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=2, NumelOut=2, "
            "Timeout(ms)=600000) ran for 600004 milliseconds before timing out."
        )


@pytest.mark.parametrize(
    ("job", "said"),
    [
        (LostJob, "Connection closed by peer [::1]:7"),
        (
            NcclLostJob,
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
            "NumelIn=2, NumelOut=2, Timeout(ms)=600000) ran for 600004 milliseconds before "
            "timing out",
        ),
    ],
)
def test_a_lost_rank_says_what_rerunning_its_job_does(tmp_path, job, said):
    with pytest.raises(NmtpipeError) as caught:
        launch.run_job(job(str(tmp_path / "out"), 3))
    assert str(caught.value) == (
        f"lost the connection to another rank of the job ({said}); "
        "its machine's log says why it stopped; re-running the same command counts again"
    )


def _record(folder, rank: int, error: BaseException) -> None:
    job = launch.RankJob(CountJob(str(folder / "out"), 1), False, None, str(folder))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("RANK", str(rank))
    try:
        launch.record_failure(job, error)
    finally:
        monkeypatch.undo()


def test_a_failed_job_tells_the_cause_once(tmp_path):
    """Each rank records its error; the job's one error is the cause, not its echoes."""
    job = CountJob(str(tmp_path / "out"), 1)
    _record(tmp_path, 0, RankLost("lost the connection to another rank of the job (...)"))
    _record(tmp_path, 1, ConfigError("--split tets: data has no split 'tets'"))
    error = launch.job_failure(job, 2, 1, str(tmp_path))
    assert type(error) is ConfigError and str(error) == "--split tets: data has no split 'tets'"
    # An error nmtpipe did not expect says which rank met it.
    _record(tmp_path, 1, TypeError("bad operand"))
    assert str(launch.job_failure(job, 2, 1, str(tmp_path))) == (
        "rank 1 of 2 failed: internal error: TypeError: bad operand (run with --verbose for "
        "the traceback)"
    )
    # A rank killed by a signal is the cause of the others' lost connections.
    (tmp_path / "torchrun.json").write_text(
        json.dumps({"rank": 1, "exitcode": -9, "signal": "SIGKILL"})
    )
    assert str(launch.job_failure(job, 2, 1, str(tmp_path))) == (
        "rank 1 of 2 died (killed by SIGKILL); re-running the same command counts again"
    )
    # torchrun's SIGTERM to the rank left is not the cause of a rank's own error...
    (tmp_path / "torchrun.json").write_text(
        json.dumps({"rank": 0, "exitcode": -15, "signal": "SIGTERM"})
    )
    assert str(launch.job_failure(job, 2, 1, str(tmp_path))).startswith("rank 1 of 2 failed")
    # ...but is when no rank says more than that it lost the others.
    _record(tmp_path, 1, RankLost("lost the connection to another rank of the job (...)"))
    assert str(launch.job_failure(job, 2, 1, str(tmp_path))) == (
        "rank 0 of 2 died (killed by SIGTERM); re-running the same command counts again"
    )
    # An interruption says what the rank that knows kept.
    _record(tmp_path, 0, Interrupted("interrupted at update 7; checkpoint at update 6 kept"))
    error = launch.job_failure(job, 2, 1, str(tmp_path), interrupted=True)
    assert type(error) is Interrupted
    assert str(error) == "interrupted at update 7; checkpoint at update 6 kept"
    _record(tmp_path, 0, KeyboardInterrupt())
    assert str(launch.job_failure(job, 2, 1, str(tmp_path))) == (
        "interrupted; re-running the same command counts again"
    )


def test_the_killed_rank_is_named_even_when_another_failed_first(tmp_path, monkeypatch):
    import torch.distributed.run

    def run(_args) -> None:
        broken = ProcessFailure(0, 100, 1, str(tmp_path / "none.json"))  # gloo: peer gone
        killed = ProcessFailure(1, 101, -signal.SIGKILL, str(tmp_path / "none.json"))
        broken.timestamp, killed.timestamp = 1, 2  # rank 0's error was recorded first
        raise ChildFailedError("job", {0: broken, 1: killed})

    monkeypatch.setattr(torch.distributed.run, "run", run)
    assert launch._torchrun(str(tmp_path), False, ["--nproc_per_node=2", "x.py"]) == 1
    record = json.loads((tmp_path / "torchrun.json").read_text())
    assert record == {"rank": 1, "exitcode": -signal.SIGKILL, "signal": "SIGKILL"}


@pytest.mark.parametrize(
    ("died", "line"),
    [
        ({"rank": 1, "exitcode": -9, "signal": "SIGKILL"}, "rank 1 of 2 died (killed by SIGKILL)"),
        ({"rank": 0, "exitcode": 3, "signal": ""}, "rank 0 of 2 died (exit 3)"),
    ],
)
def test_the_failure_line_says_how_and_that_a_rerun_resumes(died, line):
    from nmtpipe.trainers.train.train_config import TrainConfig

    config = TrainConfig(data="d", save_dir="runs/ckpt")
    assert launch.failure_line(config, 2, 1, died) == (
        f"{line}; re-running the same command resumes from the last checkpoint in runs/ckpt"
    )


def test_a_failed_decode_says_that_a_rerun_decodes_again():
    from nmtpipe.trainers.generate.decode_config import DecodeConfig

    config = DecodeConfig(checkpoint="runs/ckpt/checkpoint_best.pt", output="runs/decoded")
    assert launch.failure_line(config, 2, 9, None) == (
        "decode failed on 2 processes (torchrun exit 9); re-running the same command decodes again"
    )
