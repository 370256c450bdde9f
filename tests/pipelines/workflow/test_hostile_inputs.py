"""Every hostile input of the test bed (`tests/hostile_inputs.py`) through `nmtpipe
prepare` as a user runs it: what it says or rejects, within bounds only an unbounded
reader breaks: at most 10 times the time of a clean input for the same reader, and at
most 500 MB more than it in any process (a clean run's own is about 470 MB)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.hostile_inputs import CASES, CLEAN, Case

pytestmark = pytest.mark.slow
MEMORY = 500 << 20
SLOWER = 10
READERS_ONLY = ["--scorers", "none", "--no-langid"]  # what is measured: the readers


def prepare(args: list[str], output: Path) -> tuple[subprocess.CompletedProcess, float, int]:
    """`nmtpipe prepare ARGS` in a process of its own: what it ended with, its wall time
    and the largest resident memory of any process of its tree, sampled every 20 ms."""
    cmd = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh", *args,
           "--output", str(output), "--quiet", *READERS_ONLY]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, tree = 0, psutil.Process(proc.pid)
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):  # (a process that ended meanwhile)
            for p in [tree, *tree.children(recursive=True)]:
                peak = max(peak, p.memory_info().rss)
        time.sleep(0.02)
    out, err = proc.communicate()
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    return done, time.perf_counter() - start, peak


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict[str, tuple[float, int]]:
    """Each reader's time and largest process on a clean input."""
    found = {}
    for reader, write in CLEAN.items():
        folder = tmp_path_factory.mktemp(f"clean-{reader}")
        done, seconds, peak = prepare(write(folder), folder / "out")
        assert done.returncode == 0, done.stderr
        found[reader] = seconds, peak
    return found


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_hostile_input_is_said_or_rejected_in_bounded_time_and_memory(
    case: Case, clean, tmp_path
):
    done, seconds, peak = prepare(case.write(tmp_path), tmp_path / "out")
    if case.error is not None:
        assert done.returncode == 1, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("nmtpipe prepare: error: "), done.stderr
        assert re.search(case.error, last), last
        assert not (tmp_path / "out" / "manifest.json").exists()
    else:
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout)["result"]["stats"]
        assert {r: stats["rejects"][r] for r in case.rejects or {}} == case.rejects
    clean_seconds, clean_peak = clean[case.reader]
    assert seconds < SLOWER * clean_seconds, (seconds, clean_seconds)
    assert peak < clean_peak + MEMORY, (peak >> 20, clean_peak >> 20)
