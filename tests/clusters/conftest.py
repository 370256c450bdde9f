"""The running local clusters (`scripts/local-cluster`), found, never started: CI's
.ci/run starts them beside pytest and stops them after; without one, tests skip, saying
why. Where NMTPIPE_CLUSTER_TESTS=required (CI sets it), every skip here is a failure
instead: a cluster test that did not run is not a pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "local-cluster"
ENGINES = ("flink", "spark")
REQUIRED = "NMTPIPE_CLUSTER_TESTS"
# A file that a start of the clusters running beside pytest writes when it has ended
# (.ci/run's: the suite's other tests run meanwhile, and a first start downloads ~1 GB).
STARTED_FILE = "NMTPIPE_CLUSTERS_STARTED_FILE"
START_WAIT_S = 3600


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip of a test in tests/clusters, in any phase, is a failure where REQUIRED."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and _required():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped where {REQUIRED}=required: {reason.removeprefix('Skipped: ')}"


@pytest.fixture(scope="session", autouse=True)
def _clusters_started() -> None:
    """Before the first test here, the end of a start running beside pytest, if any."""
    marker = os.environ.get(STARTED_FILE)
    deadline = time.monotonic() + START_WAIT_S
    while marker and not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(2)


def _required() -> bool:
    return os.environ.get(REQUIRED) == "required"


def local_cluster(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@dataclass(frozen=True)
class Cluster:
    """A running cluster as `scripts/local-cluster options NAME --json` describes it."""

    name: str
    options: list[str]  # the Beam options that submit to it
    rest: str  # Flink's REST API, Spark master's web UI
    pids: dict[str, int]  # component → its process group

    def finished(self) -> int:
        """Jobs the engine itself ran to the end: Flink's FINISHED jobs, the Spark
        master's completed applications (one per Beam job: the job server's context)."""
        if self.name == "flink":
            return sum(j["state"] == "FINISHED" for j in _get(f"{self.rest}/jobs/overview")["jobs"])
        return sum(a["state"] == "FINISHED" for a in _get(f"{self.rest}/json/")["completedapps"])

    def running(self) -> bool:
        """Whether a job runs on the engine now (a Flink job RUNNING, a Spark application)."""
        if self.name == "flink":
            return any(j["state"] == "RUNNING" for j in _get(f"{self.rest}/jobs/overview")["jobs"])
        return bool(_get(f"{self.rest}/json/")["activeapps"])

    def new_jobs(self, before: int, want: int, timeout: float = 30) -> int:
        """Jobs finished since `before`, waiting up to `timeout` for `want` of them (the
        master lists an application as completed a moment after Beam reports DONE)."""
        deadline = time.monotonic() + timeout
        while (found := self.finished() - before) < want and time.monotonic() < deadline:
            time.sleep(0.5)
        return found


def find_cluster(name: str) -> Cluster:
    """The running cluster, or a skip that says why there is none."""
    if not SCRIPT.exists():
        pytest.skip(f"no {SCRIPT}")
    found = local_cluster("options", name, "--json")
    if found.returncode != 0:
        why = (found.stderr.strip().splitlines() or ["no answer"])[-1]
        pytest.skip(
            f"no {name} cluster runs ({why}); CI starts one with `scripts/local-cluster "
            f"start {name}` before pytest"
        )
    info = json.loads(found.stdout)
    return Cluster(name, info["options"].split(), info["rest"], info["pids"])


@pytest.fixture(scope="session", params=ENGINES)
def cluster(request) -> Cluster:
    return find_cluster(request.param)
