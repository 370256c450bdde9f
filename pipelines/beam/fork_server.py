"""The fork server's own program: a process that imports Beam's harness and the steps'
modules once and forks a worker per request (`forked_workers.py` starts it and talks to
it; nothing else imports this module).

It runs `python -m nmtpipe.pipelines.beam.fork_server CONTROL ALIVE`, in a session of
its own (a terminal's Ctrl-C reaches the command, which ends the workers itself), with
two descriptors from its parent, the command:

- CONTROL, a Unix socket of packets: a request is one pickled `(kind, payload)`; a fork
  request also carries two descriptors (the worker's stderr, and the write end of the
  pipe on which the worker's pid, then its exit code, are reported).
- ALIVE, the read end of a pipe whose write end only the command holds: at its end of
  file (the command ended, however: even SIGKILL) the server kills its workers and
  leaves at once, also while it is still importing (a thread of its own watches then;
  the server forks only while it is single-threaded).

A worker sets `PR_SET_PDEATHSIG` (Linux): the kernel kills it when the server ends,
however the server ends. It never runs the command's `__main__` module again, unlike
`multiprocessing`'s workers.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import logging
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

# A report on a worker's status pipe: its pid first, then its exit code (-N: signal N).
REPORT = struct.Struct("i")
# The largest request (a fork's pickled target and arguments: Beam's options as JSON).
MAX_REQUEST = 1 << 20
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process with SIGKILL when its parent ends (Linux; a
    no-op elsewhere), and leave now if `parent` has ended already."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)


@contextlib.contextmanager
def _watched(alive: int) -> Iterator[None]:
    """While the body runs (imports, which take seconds), leave at once if the command
    ends; the watching thread is gone again before the body's caller forks."""
    stop_r, stop_w = os.pipe()

    def watch() -> None:
        ready, _, _ = select.select([alive, stop_r], [], [])
        if alive in ready:
            os._exit(0)

    watcher = threading.Thread(target=watch, name="fork server watches its command")
    watcher.start()
    try:
        yield
    finally:
        os.write(stop_w, b"x")
        watcher.join()
        os.close(stop_r)
        os.close(stop_w)


@contextlib.contextmanager
def _import_warnings_dropped() -> Iterator[None]:
    """Beam warns on the root logger, at import, of clients it falls back from (no
    apitools for BigQuery): nothing nmtpipe uses. Dropped while the server imports; the
    workers get logging as a new interpreter has it."""
    root = logging.getLogger()
    quiet = logging.NullHandler()
    root.addHandler(quiet)
    try:
        with warnings.catch_warnings():  # (and what its dependencies warn of)
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeHandler(quiet)


def _import(modules: list[str]) -> None:
    """Import `modules` here, for every worker forked after; a module that fails to
    import fails again, with its error, in the worker that needs it."""
    with _import_warnings_dropped():
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)


class _Server:
    """The loop: requests on the control socket, the workers' ends, the command's end."""

    def __init__(self, control: socket.socket, alive: int) -> None:
        self.control = control
        self.alive = alive
        self.status: dict[int, int] = {}  # a live worker's pid -> its status pipe
        self.child_r, self.child_w = os.pipe()
        os.set_blocking(self.child_w, False)
        signal.set_wakeup_fd(self.child_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # (the wakeup byte is the news)

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.control, self.alive, self.child_r], [], [])
            if self.alive in ready:
                self.leave()
            if self.child_r in ready:
                os.read(self.child_r, 4096)
                self.reap()
            if self.control in ready:
                data, fds, _, _ = socket.recv_fds(self.control, MAX_REQUEST, 2)
                if not data:
                    self.leave()
                self.handle(*pickle.loads(data), fds)

    def handle(self, kind: str, payload: Any, fds: list[int]) -> None:
        if kind == "import":
            with _watched(self.alive):
                _import(payload)
        elif kind == "path":
            sys.path[:] = payload
        elif kind == "fork":
            stderr, status = fds
            self.fork(payload, stderr, status)

    def fork(self, request: bytes, stderr: int, status: int) -> None:
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            inherited = [self.control.fileno(), self.alive, self.child_r, self.child_w]
            _worker(server, request, stderr, [*inherited, status, *self.status.values()])
        os.close(stderr)
        os.write(status, REPORT.pack(pid))
        self.status[pid] = status

    def reap(self) -> None:
        while True:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            status = self.status.pop(pid, None)
            if status is not None:
                with contextlib.suppress(OSError):
                    os.write(status, REPORT.pack(os.waitstatus_to_exitcode(code)))
                os.close(status)

    def leave(self) -> None:
        """The command ended: its workers too, and this process, now (no clean-up of
        the modules imported: that took seconds)."""
        for pid in self.status:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(0)


def _worker(server: int, request: bytes, stderr: int, inherited: list[int]) -> None:
    """A forked worker: ends with its server, writes to `stderr`, runs the pickled
    `(target, args)`; its exit code is 0, a `SystemExit`'s, or 1 after a traceback."""
    code = 1
    try:
        die_with_parent(server)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        os.dup2(stderr, 1)
        os.dup2(stderr, 2)
        os.close(stderr)
        target, args = pickle.loads(request)
        target(*args)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: list[str]) -> None:
    control, alive = (int(a) for a in argv)
    _Server(socket.socket(fileno=control), alive).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
