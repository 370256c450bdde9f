"""Forked workers: their ends read once and reported, their output where the starting
process's stderr goes, all of them ended on request; the fork server made on first use
(never by an import), started again after it was killed, and ended with its process.
The real runs are the tests that use MULTI_PROCESS (tests/helpers.py),
test_local_runner.py and test_fork_server.py.

The workers are forked in a process of its own, which the fork server belongs to."""

from __future__ import annotations

import subprocess
import sys

FORKS = """
import os, signal, tempfile, time
from nmtpipe.pipelines.beam import forked_workers

assert not forked_workers._forks  # importing made nothing
forks = forked_workers.forks()
assert forks._server is None  # nor did asking for it
ends = []
exits = forks.start(os._exit, 5, name="exits", on_end=lambda w: ends.append(w.end.code))
assert exits.join(60)
with tempfile.TemporaryFile() as caught:
    terminal = os.dup(2)
    os.dup2(caught.fileno(), 2)
    try:
        says = forks.start(os.write, 2, b"said to stderr", name="says")
    finally:
        os.dup2(terminal, 2)
    assert says.join(60)
    caught.seek(0)
    print(caught.read().decode())
sleeps = forks.start(time.sleep, 600, name="sleeps", on_end=lambda w: ends.append(w.end.code))
print([w.is_alive() for w in forks.alive()])
forks.stop(timeout=10)
print(ends, [w.is_alive() for w in (exits, says, sleeps)], forks.alive(), sleeps.stopped)
# The server killed: a worker's end says so, and the next worker gets a new server.
waits = forks.start(time.sleep, 600, name="waits")
server = forks._server.process.pid
os.kill(server, signal.SIGKILL)
assert waits.join(60)
print(waits.end)
again = forks.start(os._exit, 0, name="again")
assert again.join(60) and forks._server.process.pid != server
print(again.end)
forks.close()
"""


def test_ends_are_reported_output_goes_to_stderr_and_the_server_is_made_when_needed():
    done = subprocess.run([sys.executable, "-c", FORKS], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "said to stderr",
        "[True]",
        "[5, -15] [False, False, False] [] True",
        "End(code=None, server=-9)",
        "End(code=0, server=None)",
    ]
