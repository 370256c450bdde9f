"""A local worker process that dies ends the job with one line instead of hanging it, on
the main thread or another; so does its fork server's end; Ctrl-C ends it at once."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nmtpipe.pipelines.beam.forked_workers import End
from nmtpipe.pipelines.beam.local_runner import worker_death
from tests.helpers import MULTI_PROCESS, write_pair

# Loaded by every Python process that has this folder on PYTHONPATH; it acts only in the
# fork server the local workers come from, in each worker right after its fork.
_IN_EACH_WORKER = """
    import os
    if b"nmtpipe.pipelines.beam.fork_server" in open("/proc/self/cmdline", "rb").read():
        def _each_worker():
{body}
        os.register_at_fork(after_in_child=_each_worker)
"""
# The first worker to start exits before it connects; the other lives, as after a kill
# for memory.
_DIE_AT_START = """
            try:
                os.close(os.open(os.environ["NMTPIPE_TEST_DIE_ONCE"], os.O_CREAT | os.O_EXCL))
                os._exit(3)
            except FileExistsError:
                pass
"""
# A thread that never ends: the worker cannot exit when the runner closes its channels,
# as the workers that hung CI did not.
_LINGER = """
            import threading, time
            threading.Thread(target=time.sleep, args=(3600,), name="linger").start()
"""
# nmtpipe's command with the workers' grace after the job shortened to one second, on
# the main thread or, as a program may call nmtpipe, on another.
_SHORT_GRACE = """
import sys, threading
from nmtpipe.pipelines.beam import local_runner
from nmtpipe.pipelines.cli.main import main
local_runner.CLOSE_GRACE_SECONDS = 1.0
args = sys.argv[1:]
if args[0] == "--on-a-thread":
    codes = []
    thread = threading.Thread(target=lambda: codes.append(main(args[1:])))
    thread.start()
    thread.join()
    sys.exit(codes[0])
sys.exit(main(args))
"""


def _env(tmp_path, each_worker: str, **more: str) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    code = textwrap.dedent(_IN_EACH_WORKER.format(body=each_worker.strip("\n")))
    (site / "sitecustomize.py").write_text(code)
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **more}


def _prepare(
    args: list[str], env: dict[str, str] | None = None, thread: bool = False
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _SHORT_GRACE, *(["--on-a-thread"] if thread else []),
         "prepare", "-s", "en", "-t", "zh", *MULTI_PROCESS, *args],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (3, "return code 3)"),
        (-9, "-9, killed by SIGKILL: out of memory?)"),
        (-15, "-15, killed by SIGTERM)"),
    ],
)
def test_the_line_names_the_return_code_and_the_signal(code, said):
    line = worker_death(End(code))
    assert line.startswith("a Beam worker process on this machine ended (return code ")
    assert said in line
    assert line.endswith("nothing was committed (run again with --verbose to see its output)")


def test_the_line_of_a_fork_server_that_ended():
    assert worker_death(End(None, -9)) == (
        "nmtpipe's fork server of local Beam workers ended (-9, killed by SIGKILL: out of "
        "memory?) before the job did, and its workers with it; nothing was committed: run "
        "the command again"
    )


@pytest.mark.parametrize("thread", [False, True], ids=["main thread", "another thread"])
def test_a_worker_that_dies_before_it_connects_ends_the_job(tmp_path, thread):
    # Beam's runner alone waits for such a worker forever (tried: killed after 2 minutes).
    write_pair(tmp_path / "t", ["one", "two"], ["一", "二"])
    env = _env(tmp_path, _DIE_AT_START, NMTPIPE_TEST_DIE_ONCE=str(tmp_path / "died"))
    out = tmp_path / "out"
    args = ["--trainpref", str(tmp_path / "t"), "--output", str(out)]
    proc = _prepare(args, env, thread)
    assert (tmp_path / "died").exists()
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "nmtpipe prepare: error: a Beam worker process on this machine ended (return code 3) "
        "before the job did; nothing was committed (run again with --verbose to see its output)"
    )
    assert not (out / "manifest.json").exists()
    # The same command, the worker left alone, commits.
    rerun = _prepare(args)
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "manifest.json").exists()


def test_workers_that_outlive_the_job_are_stopped_and_the_job_ends_as_it_would(tmp_path):
    """Beam alone waits for such workers forever, after the job's end (CI hung so)."""
    env = _env(tmp_path, _LINGER)
    (tmp_path / "bad.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "bad.zh").write_text("一\n二\n")
    write_pair(tmp_path / "good", ["one", "two"], ["一", "二"])
    out = ["--output", str(tmp_path / "out")]
    failed = _prepare([*out, "--trainpref", str(tmp_path / "bad")], env)
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == (
        f"nmtpipe prepare: error: {tmp_path}/bad.en has 3 lines but {tmp_path}/bad.zh has 2"
    )
    done = _prepare([*out, "--trainpref", str(tmp_path / "good")], env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "manifest.json").exists()


# Each worker, as it starts: the first kills the fork server, its parent (a server killed
# for memory, say); or every one tells where it is and waits, as on a long bundle.
_KILL_SERVER = """
            try:
                os.close(os.open(os.environ["NMTPIPE_TEST_DIE_ONCE"], os.O_CREAT | os.O_EXCL))
                os.kill(os.getppid(), 9)
            except FileExistsError:
                pass
"""
_SAY_AND_WAIT = """
            with open(os.environ["NMTPIPE_TEST_WORKERS"], "a") as f:
                f.write(f"{os.getpid()}\\n")
            import time
            time.sleep(3600)
"""


def test_a_fork_server_that_is_killed_ends_the_job_in_one_line(tmp_path):
    write_pair(tmp_path / "t", ["one", "two"], ["一", "二"])
    env = _env(tmp_path, _KILL_SERVER, NMTPIPE_TEST_DIE_ONCE=str(tmp_path / "died"))
    out = tmp_path / "out"
    proc = _prepare(["--trainpref", str(tmp_path / "t"), "--output", str(out)], env)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "nmtpipe prepare: error: nmtpipe's fork server of local Beam workers ended (-9, killed "
        "by SIGKILL: out of memory?) before the job did, and its workers with it; nothing was "
        "committed: run the command again"
    )
    assert not (out / "manifest.json").exists()


def test_ctrl_c_ends_a_run_at_once_in_one_line(tmp_path):
    """SIGINT to the command's process group, as a terminal's Ctrl-C sends it."""
    write_pair(tmp_path / "t", ["one", "two"], ["一", "二"])
    workers = tmp_path / "workers"
    env = _env(tmp_path, _SAY_AND_WAIT, NMTPIPE_TEST_WORKERS=str(workers))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh",
               *MULTI_PROCESS, "--trainpref", str(tmp_path / "t"),
               "--output", str(out)]  # fmt: skip
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not (workers.exists() and len(workers.read_text().split()) == 2):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines()[-1] == (
        "nmtpipe prepare: interrupted while Beam ran Prepare; it committed nothing"
    )
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert stdout == ""
    time.sleep(1)  # (a killed worker is a zombie until its parent, or init, reaps it)
    for pid in workers.read_text().split():
        with contextlib.suppress(FileNotFoundError):
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            assert state == "Z", f"worker {pid} outlived the command"
    assert not out.exists()  # nothing committed, and no output folder or staging left


def test_the_fork_server_imports_the_modules_of_the_pipelines_transforms():
    import apache_beam as beam

    from nmtpipe.pipelines.beam.local_runner import pipeline_modules
    from nmtpipe.transforms.beam.prepare_fns import PlanChunksFn

    pipeline = beam.Pipeline()
    _ = pipeline | beam.Create([1]) | beam.ParDo(PlanChunksFn(chunk_lines=10))
    assert pipeline_modules(pipeline) == {
        "apache_beam.transforms.core",
        "nmtpipe.transforms.beam.prepare_fns",
    }
