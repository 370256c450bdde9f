"""Forked workers: their ends read once and reported, their output where the starting
process's stderr goes, all of them ended on request; and the guess, before Beam is
imported, that a command will fork any. The real runs are the tests that use
MULTI_PROCESS (tests/helpers.py) and test_worker_watch.py.

The workers are forked in a process of its own: its fork server would outlive the test
in this one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nmtpipe.pipelines.beam import forked_workers

FORKS = """
import os, tempfile, time
from nmtpipe.pipelines.beam.forked_workers import FORKS

ends = []
exits = FORKS.start(os._exit, 5, name="exits", on_end=ends.append)
assert exits.join(60)
with tempfile.TemporaryFile() as caught:
    terminal = os.dup(2)
    os.dup2(caught.fileno(), 2)
    try:
        says = FORKS.start(os.write, 2, b"said to stderr", name="says")
    finally:
        os.dup2(terminal, 2)
    assert says.join(60)
    caught.seek(0)
    print(caught.read().decode())
sleeps = FORKS.start(time.sleep, 600, name="sleeps", on_end=ends.append)
print([w.is_alive() for w in FORKS.alive()])
FORKS.stop_all(timeout=10)
deadline = time.monotonic() + 10
while len(ends) < 2 and time.monotonic() < deadline:  # (reported after the end is seen)
    time.sleep(0.05)
print(ends, [w.is_alive() for w in (exits, says, sleeps)], FORKS.alive())
"""


def test_ends_are_reported_output_goes_to_stderr_and_all_are_ended_on_request():
    done = subprocess.run([sys.executable, "-c", FORKS], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "said to stderr",
        "[True]",
        "[5, -15] [False, False, False] []",
    ]


@pytest.mark.parametrize(
    ("argv", "likely"),
    [
        (["prepare", "--trainpref", "corpus"], True),
        (["--runner=FnApiRunner", "--direct_num_workers=4"], True),
        (["--runner", "DirectRunner"], True),
        (["--direct_running_mode=multi_processing"], True),
        (["--runner=FlinkRunner", "--flink_master=localhost:8081"], False),
        (["--runner", "DataflowRunner"], False),
        (["--direct_running_mode=in_memory"], False),
        (["--direct_running_mode", "multi_threading"], False),
    ],
)
def test_workers_are_likely_unless_an_argument_rules_them_out(argv, likely, monkeypatch):
    monkeypatch.setattr(forked_workers.os, "cpu_count", lambda: 2)
    assert forked_workers.likely(argv) is likely


def test_one_core_forks_no_workers(monkeypatch):
    monkeypatch.setattr(forked_workers.os, "cpu_count", lambda: 1)
    assert not forked_workers.likely(["prepare"])
