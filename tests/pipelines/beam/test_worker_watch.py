"""A local worker process that dies ends the job with one line instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from nmtpipe.pipelines.beam.worker_watch import worker_death
from tests.helpers import MULTI_PROCESS, write_pair

# Loaded by every Python process that has this folder on PYTHONPATH; it acts only in a
# Beam worker (the runner hands each its control address in the environment) and only
# once, in the first worker to start: the other lives, as after a kill for memory.
_DIE_AT_START = """
    import os
    if os.environ.get("CONTROL_API_SERVICE_DESCRIPTOR"):
        try:
            os.close(os.open(os.environ["NMTPIPE_TEST_DIE_ONCE"], os.O_CREAT | os.O_EXCL))
            os._exit(3)
        except FileExistsError:
            pass
"""


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("Worker subprocess exited with return code 3", "return code 3)"),
        ("Worker subprocess exited with return code 137", "137, killed by SIGKILL: out of memory"),
        ("Worker subprocess exited with return code -15", "-15, killed by SIGTERM)"),
    ],
)
def test_the_line_names_the_return_code_and_the_signal(message, said):
    line = worker_death(message)
    assert line.startswith("a Beam worker process on this machine ended (return code ")
    assert said in line
    assert line.endswith("nothing was committed (run again with --verbose to see its output)")


def test_a_worker_that_dies_before_it_connects_ends_the_job(tmp_path):
    # Beam's runner alone waits for such a worker forever (tried: killed after 2 minutes).
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(_DIE_AT_START))
    write_pair(tmp_path / "t", ["one", "two"], ["一", "二"])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "NMTPIPE_TEST_DIE_ONCE": str(tmp_path / "died"),
    }
    out = tmp_path / "out"
    args = ["prepare", "-s", "en", "-t", "zh", "--trainpref", str(tmp_path / "t")]
    proc = subprocess.run(
        [sys.executable, "-m", "nmtpipe", *args, "--output", str(out), *MULTI_PROCESS],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert (tmp_path / "died").exists()
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "nmtpipe prepare: error: a Beam worker process on this machine ended (return code 3) "
        "before the job did; nothing was committed (run again with --verbose to see its output)"
    )
    assert not (out / "manifest.json").exists()
    # The same command, the worker left alone, commits.
    rerun = subprocess.run(
        [sys.executable, "-m", "nmtpipe", *args, "--output", str(out), *MULTI_PROCESS],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    assert (out / "manifest.json").exists(), rerun.stderr
