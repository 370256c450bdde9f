"""No process of a command outlives it by a second: not its fork server, not a worker,
however the command ends (done, Ctrl-C, SIGTERM, SIGKILL) and whenever (starting, while
the fork server imports, while the workers work). A command that runs no worker starts
no fork server.

Every process a command starts inherits its environment: the command runs with a tag
of its own there, and /proc says which processes still carry it, re-parented or not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import IN_MEMORY, MULTI_PROCESS, write_pair

TAG = "NMTPIPE_TEST_TAG"
# Every worker, once forked, says so and waits (as on a long bundle), so that a kill
# finds them at work.
_WORKERS_WAIT = """
import os
if b"nmtpipe.pipelines.beam.fork_server" in open("/proc/self/cmdline", "rb").read():
    def _each_worker():
        with open(os.environ["NMTPIPE_TEST_WORKERS"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        import time
        time.sleep(3600)
    os.register_at_fork(after_in_child=_each_worker)
"""


def tagged(tag: str) -> list[str]:
    """The processes whose environment holds `tag`: their pid and command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if f"{TAG}={tag}".encode() in environ.split(b"\0"):
            found.append(f"{entry.name}: {cmdline}")
    return found


def _wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 180
    while not condition():
        assert proc.poll() is None, f"the command ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within 180 s"
        time.sleep(0.02)


@pytest.fixture
def corpus(tmp_path):
    return write_pair(tmp_path / "t", ["one", "two", "three"], ["一", "二", "三"])


def _start(tmp_path: Path, corpus: Path, beam: list[str], tag: str) -> subprocess.Popen:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(_WORKERS_WAIT))
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, TAG: tag, "NMTPIPE_TEST_WORKERS": str(tmp_path / "workers"),
           "PYTHONPATH": path}  # fmt: skip
    command = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh", *beam,
               "--trainpref", str(corpus), "--output", str(tmp_path / "out")]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip


def _server_started(tag: str) -> bool:
    return any("fork_server" in p for p in tagged(tag))


@pytest.mark.parametrize(
    ("signum", "when"),
    [
        (signal.SIGKILL, "starting"),
        (signal.SIGTERM, "server importing"),
        (signal.SIGKILL, "server importing"),
        (signal.SIGTERM, "workers working"),
        (signal.SIGKILL, "workers working"),
        (signal.SIGINT, "workers working"),
    ],
)
def test_nothing_outlives_a_killed_command(tmp_path, corpus, signum, when):
    tag = uuid.uuid4().hex
    proc = _start(tmp_path, corpus, MULTI_PROCESS, tag)
    if when == "starting":
        time.sleep(0.3)
    elif when == "server importing":
        _wait_for(lambda: _server_started(tag), proc, "fork server")
    else:
        workers = tmp_path / "workers"
        _wait_for(lambda: workers.exists() and len(workers.read_text().split()) == 2, proc,
                  "two workers")  # fmt: skip
    # As a terminal sends Ctrl-C (to the foreground group); the others to the command.
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        os.kill(proc.pid, signum)
    proc.wait(timeout=60)
    time.sleep(1)
    assert tagged(tag) == []


def test_nothing_outlives_a_command_that_ends(tmp_path, corpus):
    tag = uuid.uuid4().hex
    (tmp_path / "site").mkdir()  # (no waiting workers: `_start` writes them otherwise)
    env = {**os.environ, TAG: tag}
    command = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh",
               *MULTI_PROCESS, "--trainpref", str(corpus),
               "--output", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    time.sleep(1)
    assert tagged(tag) == []


def test_a_run_in_this_process_starts_no_fork_server(tmp_path, corpus):
    code = (
        "import sys\n"
        "from nmtpipe.pipelines.beam import forked_workers\n"
        "from nmtpipe.pipelines.cli.main import main\n"
        f"assert main(['prepare', '-s', 'en', '-t', 'zh', *{IN_MEMORY!r},"
        f" '--trainpref', {str(corpus)!r}, '--output', {str(tmp_path / 'out')!r}]) == 0\n"
        "assert not forked_workers._forks or forked_workers._forks[0]._server is None\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
