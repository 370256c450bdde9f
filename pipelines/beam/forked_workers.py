"""Beam worker processes forked from a fork server that imported Beam's harness once.

A Beam SDK worker started as a new interpreter spends about 1.9 CPU-seconds importing
Beam's harness and nmtpipe's Beam steps before it does any work. A local run on two
cores starts two, a cluster's TaskManager one per stage and slot (16 to 34 for one
prepare job: benchmarks/RESULTS.md). Here those imports happen once, in a fork server
(`fork_server.py`: a process of its own, started from a clean interpreter,
single-threaded when it forks), and every worker is a fork of it. Both the local runner
(`local_runner.py`) and the cluster worker pool (`worker_pool.py`) start their workers
here.

The server is this process's (`forks()`), started by the first run that needs workers,
never by an import: a command that runs no worker starts none. It imports what it is
asked to (`Forks.preload`: the modules of the transforms a pipeline holds) and ends with
this process, however this process ends (its end of a pipe is the server's signal), and
its workers with it; `close` ends it earlier, as a command's exit does.

A worker writes its stdout and stderr where this process's stderr goes at the time it
starts (a terminal, or /dev/null while nmtpipe keeps workers quiet), never to this
process's stdout, which may carry a command's result.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from nmtpipe.pipelines.beam.fork_server import REPORT

# Beam's SDK harness, which every worker runs (`sdk_worker`).
HARNESS = "apache_beam.runners.worker.sdk_worker_main"


def sdk_worker(control: str, worker_id: str, pipeline_options: str = "{}") -> None:
    """A Beam SDK worker as `sdk_worker_main` builds one (pipeline options, Beam plugins,
    state cache and the rest), until its runner closes the control channel or it breaks.
    The target of every worker forked here (Beam is imported by then)."""
    from apache_beam.portability.api import endpoints_pb2
    from apache_beam.runners.worker import sdk_worker_main
    from google.protobuf import text_format

    descriptor = text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=control))
    environment = {
        "CONTROL_API_SERVICE_DESCRIPTOR": descriptor,
        "PIPELINE_OPTIONS": pipeline_options,
        "WORKER_ID": worker_id,
    }
    _, harness, _ = sdk_worker_main.create_harness(environment)
    harness.run()


@dataclass(frozen=True)
class End:
    """How a worker ended: its exit code (-N: killed by signal N), or None when its
    fork server ended first (then `server` says how: its exit code the same way, or
    None if it could not be seen)."""

    code: int | None
    server: int | None = None

    @property
    def clean(self) -> bool:
        return self.code == 0


def _report(status: int) -> int | None:
    """The next report on a worker's status pipe (its pid, then its exit code), read
    without a buffer (a buffered read could take the exit code along with the pid of a
    worker that ended at once); None at the pipe's end (the server ended)."""
    data = b""
    while len(data) < REPORT.size:
        more = os.read(status, REPORT.size - len(data))
        if not more:
            return None
        data += more
    return REPORT.unpack(data)[0]


class ServerEnded(OSError):
    """The fork server ended before it could fork a worker; `code`: its exit code (-N:
    killed by signal N), None if not seen."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"nmtpipe's fork server ended ({code})")
        self.code = code


class Worker:
    """A forked worker process; a thread of its own waits for its end, reported by the
    fork server on the worker's status pipe."""

    def __init__(
        self, pid: int, status: int, name: str, on_end: Callable[[End], None] | None,
        server: subprocess.Popen,
    ) -> None:  # fmt: skip
        self.pid = pid
        self.name = name
        self.end: End | None = None
        self.stopped = False  # ended by this process's request, not by itself
        self._status = status
        self._server = server
        self._on_end = on_end
        self._ended = threading.Event()
        threading.Thread(target=self._wait, name=f"{name} waits", daemon=True).start()

    def _wait(self) -> None:
        code = _report(self._status)
        os.close(self._status)
        if code is not None:
            self.end = End(code)
        else:  # the server ended, and the worker with it
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._server.wait(timeout=5)
            self.end = End(None, self._server.returncode)
        if self._on_end is not None:
            self._on_end(self)
        self._ended.set()

    def is_alive(self) -> bool:
        return not self._ended.is_set()

    def join(self, timeout: float | None = None) -> bool:
        """Whether it ended within `timeout` seconds (its `on_end` has run by then)."""
        return self._ended.wait(timeout)

    def _signal(self, signum: int) -> None:
        self.stopped = True
        if self.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, and wait for its end."""
        self._signal(signal.SIGKILL)
        self.join()


class _Server:
    """A running fork server: the process, the socket of its requests, and this side
    of the pipe whose end tells it this process ended."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        alive_r, self.alive = os.pipe()
        command = [sys.executable, "-m", "nmtpipe.pipelines.beam.fork_server"]
        try:
            self.process = subprocess.Popen(
                [*command, str(theirs.fileno()), str(alive_r)],
                pass_fds=(theirs.fileno(), alive_r),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # never this process's stdout: see the module
                start_new_session=True,  # a terminal's Ctrl-C is the command's to handle
            )
        except BaseException:
            mine.close()
            os.close(self.alive)
            raise
        finally:
            theirs.close()
            os.close(alive_r)
        self.control = mine
        self.imported: set[str] = set()
        self.send("path", list(sys.path))

    def send(self, kind: str, payload: Any, fds: Iterable[int] = ()) -> None:
        socket.send_fds(self.control, [pickle.dumps((kind, payload))], list(fds))

    def running(self) -> bool:
        return self.process.poll() is None

    def close(self, timeout: float = 5.0) -> None:
        """End it (and its workers) and wait for its end."""
        self.control.close()
        with contextlib.suppress(OSError):
            os.close(self.alive)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Forks:
    """This process's fork server (started on first use, started again if it ended) and
    the workers it forked."""

    def __init__(self) -> None:
        self._server: _Server | None = None
        self._workers: list[Worker] = []
        # Reentrant: Ctrl-C's handler stops workers on the thread it interrupts.
        self._lock = threading.RLock()
        atexit.register(self.close)

    def _running(self) -> _Server:
        """The server, started now unless it runs (hold `_lock`)."""
        if self._server is not None and not self._server.running():
            self._server.close()
            self._server = None
        if self._server is None:
            self._server = _Server()
        return self._server

    def preload(self, modules: Iterable[str]) -> None:
        """Have the server import `modules` (and Beam's harness) before it forks the next
        worker, starting it if need be. Returns at once: it imports on its own."""
        with self._lock:
            server = self._running()
            new = sorted({HARNESS, *modules} - server.imported)
            if new:
                server.send("import", new)
                server.imported.update(new)

    def start(
        self,
        target: Callable[..., None],
        *args: Any,
        name: str,
        on_end: Callable[[Worker], None] | None = None,
    ) -> Worker:
        """A worker running `target(*args)`, forked now (OSError: it could not be);
        `on_end(worker)` is called, on a thread of its own, when it ends, before `join`
        returns."""
        status_r, status_w = os.pipe()
        try:
            with self._lock:
                server = self._running()
                request = pickle.dumps((target, args))
                server.send("fork", request, [2, status_w])  # (fd 2: see the module)
            os.close(status_w)
            status_w = -1
            pid = _report(status_r)
            if pid is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    server.process.wait(timeout=5)
                raise ServerEnded(server.process.returncode)
        except BaseException:
            os.close(status_r)
            if status_w >= 0:
                os.close(status_w)
            raise
        worker = Worker(pid, status_r, name, on_end, server.process)
        with self._lock:
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        return worker

    def alive(self) -> list[Worker]:
        """The workers started and still running."""
        with self._lock:
            return [w for w in self._workers if w.is_alive()]

    def stop(self, workers: Iterable[Worker] | None = None, timeout: float = 10.0) -> None:
        """End `workers` (default: every one): SIGTERM, then SIGKILL for any still there
        after `timeout` seconds."""
        with self._lock:
            chosen = list(self._workers if workers is None else workers)
        for worker in chosen:
            worker.terminate()
        for worker in chosen:
            if not worker.join(timeout):
                worker.kill()

    def close(self) -> None:
        """End the server and its workers (at this process's exit, or earlier)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.close()


_forks: list[Forks] = []
_forks_lock = threading.Lock()


def forks() -> Forks:
    """This process's `Forks`, made on first use (its server starts with the first
    worker or preload)."""
    with _forks_lock:
        if not _forks:
            _forks.append(Forks())
        return _forks[0]
