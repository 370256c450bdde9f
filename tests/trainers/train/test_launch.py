"""The one line for a failed torchrun job: the rank that was killed, not its victims."""

from __future__ import annotations

import json
import signal

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from nmtpipe.trainers.train import launch


def test_the_killed_rank_is_named_even_when_another_failed_first(tmp_path, monkeypatch):
    import torch.distributed.run

    def run(_args) -> None:
        broken = ProcessFailure(0, 100, 1, str(tmp_path / "none.json"))  # gloo: peer gone
        killed = ProcessFailure(1, 101, -signal.SIGKILL, str(tmp_path / "none.json"))
        broken.timestamp, killed.timestamp = 1, 2  # rank 0's error was recorded first
        raise ChildFailedError("job", {0: broken, 1: killed})

    monkeypatch.setattr(torch.distributed.run, "run", run)
    failure = tmp_path / "failure.json"
    assert launch._torchrun(str(failure), False, ["--nproc_per_node=2", "x.py"]) == 1
    record = json.loads(failure.read_text())
    assert record == {"rank": 1, "exitcode": -signal.SIGKILL, "signal": "SIGKILL"}


@pytest.mark.parametrize(
    ("died", "line"),
    [
        ({"rank": 1, "exitcode": -9, "signal": "SIGKILL"}, "rank 1 of 2 died (killed by SIGKILL)"),
        ({"rank": 0, "exitcode": 3, "signal": ""}, "rank 0 of 2 died (exit 3; its error is above)"),
    ],
)
def test_the_failure_line_says_how_and_that_a_rerun_resumes(died, line):
    from nmtpipe.trainers.train.train_config import TrainConfig

    config = TrainConfig(data="d", save_dir="runs/ckpt")
    assert launch.failure_line(config, 2, 1, died) == (
        f"{line}; re-running the same command resumes from the last checkpoint in runs/ckpt"
    )
