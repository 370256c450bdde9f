"""A local worker process that dies ends the job with one line instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from nmtpipe.pipelines.beam import worker_watch
from nmtpipe.pipelines.beam.worker_watch import worker_death
from nmtpipe.pipelines.cli.main import main
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


# Starts, in every Beam worker, a thread that never ends: the worker's interpreter cannot
# exit when the runner closes its channels, as the workers that hung CI did not.
_LINGER = """
    import os, threading, time
    if os.environ.get("CONTROL_API_SERVICE_DESCRIPTOR"):
        threading.Thread(target=time.sleep, args=(3600,), name="linger").start()
"""


def _sitecustomize(tmp_path, text: str) -> str:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(text))
    return os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])


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
    write_pair(tmp_path / "t", ["one", "two"], ["一", "二"])
    env = {
        **os.environ,
        "PYTHONPATH": _sitecustomize(tmp_path, _DIE_AT_START),
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


def test_workers_that_outlive_the_job_are_stopped_and_the_job_ends_as_it_would(
    tmp_path, monkeypatch, capsys
):
    """Beam alone waits for such workers forever, after the job's end (CI hung so)."""
    monkeypatch.setenv("PYTHONPATH", _sitecustomize(tmp_path, _LINGER))
    monkeypatch.setattr(worker_watch, "CLOSE_GRACE_SECONDS", 1.0)
    (tmp_path / "bad.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "bad.zh").write_text("一\n二\n")
    write_pair(tmp_path / "good", ["one", "two"], ["一", "二"])
    args = ["prepare", "-s", "en", "-t", "zh", *MULTI_PROCESS, "--output"]
    assert main([*args, str(tmp_path / "out"), "--trainpref", str(tmp_path / "bad")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"nmtpipe prepare: error: {tmp_path}/bad.en has 3 lines but {tmp_path}/bad.zh has 2"
    )
    assert main([*args, str(tmp_path / "out"), "--trainpref", str(tmp_path / "good")]) == 0
    assert (tmp_path / "out" / "manifest.json").exists()
    assert not worker_watch._children().get(os.getpid())
