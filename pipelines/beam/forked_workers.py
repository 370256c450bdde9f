"""Beam worker processes forked from a fork server that imported Beam's harness once.

A Beam SDK worker started as a new interpreter spends about 1.9 CPU-seconds importing
Beam's harness and nmtpipe's Beam steps before it does any work. A local run on two
cores starts two, a cluster's TaskManager one per stage and slot (16 to 34 for one
prepare job: benchmarks/RESULTS.md, issue 43). Here those imports happen once, in a
fork server (Python's `multiprocessing` "forkserver": a process of its own, started
from a clean interpreter, single-threaded when it forks), and every worker is a fork of
it. Both the local runner (`local_runner.py`) and the cluster worker pool
(`worker_pool.py`) start their workers here.

A worker writes its stdout and stderr where the starting process's stderr goes at the
time it starts (a terminal, or /dev/null while nmtpipe keeps workers quiet), never to
that process's stdout, which may carry a command's result.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
from collections.abc import Callable
from multiprocessing import connection, forkserver, reduction
from multiprocessing.process import BaseProcess
from typing import Any

# What the fork server imports once for every worker: the harness and the modules whose
# DoFns the steps' workers unpickle.
PRELOAD = [
    "apache_beam.runners.worker.sdk_worker_main",
    "nmtpipe.transforms.beam.prepare",
    "nmtpipe.transforms.beam.encode",
    "nmtpipe.transforms.beam.sample",
]


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


class _Stderr:
    """This process's stderr, handed to a forked worker as a descriptor of its own (the
    fork server passes it along with the worker's arguments)."""

    def __reduce__(self) -> tuple[Callable[..., int], tuple[Any]]:
        return _received, (reduction.DupFd(2),)


def _received(duplicate: Any) -> int:
    return duplicate.detach()


def _run(target: Callable[..., None], stderr: int, *args: Any) -> None:
    """A worker: its output redirected to `stderr`, then `target(*args)`."""
    os.dup2(stderr, 1)
    os.dup2(stderr, 2)
    os.close(stderr)
    target(*args)


# `multiprocessing` reads a forked process's end from a pipe, once: two threads that
# ask at once can lose it (the second reads the pipe's end and says 255), and each
# `Process.start` asks about every process started before. So a start and the reading
# of an end hold this lock, and nothing else asks.
_POLLING = threading.Lock()


class Worker:
    """A forked worker process; a thread of its own waits for its end (see `_POLLING`)."""

    def __init__(self, process: BaseProcess, on_end: Callable[[int], None] | None) -> None:
        self.process = process
        self.exitcode: int | None = None
        self._on_end = on_end
        self._ended = threading.Event()
        threading.Thread(target=self._wait, name=f"{process.name} waits", daemon=True).start()

    def _wait(self) -> None:
        connection.wait([self.process.sentinel])
        with _POLLING:  # the end is read here or by a start's clean-up, never by both
            self.exitcode = self.process.exitcode
        self._ended.set()
        if self._on_end is not None:
            self._on_end(self.exitcode if self.exitcode is not None else 255)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def is_alive(self) -> bool:
        return not self._ended.is_set()

    def join(self, timeout: float | None = None) -> bool:
        """Whether it ended within `timeout` seconds."""
        return self._ended.wait(timeout)

    def terminate(self) -> None:
        if self.is_alive():
            self.process.terminate()

    def kill(self) -> None:
        """SIGKILL, and wait for its end."""
        if self.is_alive():
            self.process.kill()
        self.join()


class Forks:
    """The worker processes this process has forked, and the fork server they come from
    (one per process: `multiprocessing`'s, started by the first `warm_up` or `start`)."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)
        self._workers: list[Worker] = []
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Start the fork server now, not with the first worker: its imports then run
        beside this process's own work. Returns at once (the server imports on its own)."""
        forkserver.ensure_running()

    def start(
        self,
        target: Callable[..., None],
        *args: Any,
        name: str,
        on_end: Callable[[int], None] | None = None,
    ) -> Worker:
        """A worker running `target(*args)`, forked now (OSError: it could not be);
        `on_end(exit code)` is called, on a thread of its own, when it ends (a signal
        N gives -N)."""
        process = self._context.Process(
            target=_run, args=(target, _Stderr(), *args), name=name, daemon=True
        )  # (daemon: ended, not waited for, if this process exits first)
        with _POLLING:  # (a start polls the processes started before)
            process.start()
        worker = Worker(process, on_end)
        with self._lock:
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        return worker

    def alive(self) -> list[Worker]:
        """The workers started and still running."""
        with self._lock:
            return [w for w in self._workers if w.is_alive()]

    def stop_all(self, timeout: float = 10.0) -> None:
        """End every worker: SIGTERM, then SIGKILL for any still there after `timeout`."""
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.terminate()
        for worker in workers:
            if not worker.join(timeout):
                worker.kill()


FORKS = Forks()

# Beam arguments that rule out local worker processes: a runner other than Beam's local
# ones, or a local run in this process or its threads.
_NO_WORKERS = re.compile(
    r"--runner[= ](?!(FnApiRunner|\w*DirectRunner)\b)|--direct_running_mode[= ](?!multi_processing)"
)


def likely(argv: list[str]) -> bool:
    """A guess, before Beam is imported, that a command with arguments `argv` forks
    local workers: this machine has more than one core and no argument rules them out.
    A wrong guess costs a fork server that idles until the command ends, or its start
    later (the local runner starts it when a run needs workers)."""
    return (os.cpu_count() or 1) > 1 and not _NO_WORKERS.search(" ".join(argv))
