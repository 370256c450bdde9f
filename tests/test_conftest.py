"""The suite's own rules (conftest.py): a terminated run still tears its fixtures down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

A_TEST = """
import time
import pytest

@pytest.fixture(scope="module")
def started(tmp_path_factory):
    (FOLDER / "started").touch()
    yield
    (FOLDER / "torn-down").touch()

def test_waits(started):
    time.sleep(60)
"""


def test_sigterm_ends_the_run_with_its_fixtures_torn_down(tmp_path):
    """As CI's or a user's `kill` ends pytest: the module fixture's teardown runs (in
    tests/clusters, the one that stops the network-namespace hosts' clusters)."""
    test = tmp_path / "test_waits.py"
    test.write_text(f"from pathlib import Path\nFOLDER = Path({str(tmp_path)!r})\n{A_TEST}")
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(test)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
        time.sleep(0.1)
    os.kill(run.pid, signal.SIGTERM)
    out, _ = run.communicate(timeout=60)
    assert run.returncode == 2, out  # pytest's "interrupted"
    assert "terminated by signal 15" in out
    assert (tmp_path / "torn-down").exists(), out
