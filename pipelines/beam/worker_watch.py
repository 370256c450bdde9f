"""A local worker process that dies must end the job, not hang it.

With `--direct_running_mode=multi_processing` Beam's FnApiRunner starts each worker
process from a thread of its own (named `run_worker`), which raises `RuntimeError:
Worker subprocess exited with return code N` when the process ends badly. Nothing
passes that on: a worker that dies before it connects (killed for memory, a failed
import, a crash while starting) leaves the runner waiting for its answer forever, with
no output at all (tried: a worker made to exit at start-up hung `nmtpipe prepare` until
it was killed). A worker that dies later closes its channel and the runner fails, but
with `Channel closed prematurely`, which says nothing of why.

`watch_workers` watches for that thread's failure, stops this run's other worker
processes (Beam's clean-up waits for each to exit, and a worker that is still connected
never does once the job is interrupted: tried) and interrupts the main thread with a
`RunnerError` naming the return code, the signal behind it if any, and where to see the
worker's own output.

It also bounds that clean-up. Once a job is over, Beam closes each worker's channels and
waits, without a limit, for its process to exit. A worker that lingers (its interpreter
held by a thread that never ends) hung CI twice, inside `pipeline.run()` after a job had
already failed with a clear error (`tests/pipelines/cli/test_cli.py`, a misaligned
corpus, on two worker processes; the stacks: the main thread in `close_all`, each
`run_worker` thread in `Popen.wait`). After `CLOSE_GRACE_SECONDS` this run's workers are
killed, and the job ends as it was going to: its own error, or success.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from apache_beam.runners.portability.fn_api_runner import worker_handlers

from nmtpipe.transforms.errors import RunnerError

# The name Beam gives the thread that starts and waits on a local worker process
# (`SubprocessSdkWorkerHandler.start_worker`), and the module that process runs, in a
# shell of its own (`sh -c '<python> -m apache_beam.runners.worker.sdk_worker_main'`).
_WORKER_THREAD = "run_worker"
_WORKER_MAIN = b"apache_beam.runners.worker.sdk_worker_main"
_WAKE = signal.SIGUSR1
# How long a worker may take to exit once the runner has closed its channels (they exit
# within a second when all is well).
CLOSE_GRACE_SECONDS = 10.0


def worker_death(message: str) -> str:
    """What a user reads of Beam's `Worker subprocess exited with return code N`: the
    code, and the signal when the shell that started the worker reports one (128 + n)."""
    code = message.rsplit(" ", 1)[-1]
    if code.lstrip("-").isdigit() and (abs(int(code)) > 128 or int(code) < 0):
        number = int(code) - 128 if int(code) > 0 else -int(code)
        with contextlib.suppress(ValueError):
            code += f", killed by {signal.Signals(number).name}"
            if number == signal.SIGKILL:
                code += ": out of memory?"
    return (
        f"a Beam worker process on this machine ended (return code {code}) before the job "
        "did; nothing was committed (run again with --verbose to see its output)"
    )


def _children() -> dict[int, list[int]]:
    """Each process's children, from /proc (empty where there is none)."""
    found: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            with contextlib.suppress(OSError, ValueError):
                stat = Path(entry.path, "stat").read_bytes()
                parent = int(stat.rsplit(b")", 1)[1].split()[1])
                found.setdefault(parent, []).append(int(entry.name))
    return found


def _stop_workers() -> None:
    """SIGKILL the worker processes this process started, and their shells."""
    children = _children()
    for shell in children.get(os.getpid(), []):
        with contextlib.suppress(OSError):
            if _WORKER_MAIN not in Path(f"/proc/{shell}/cmdline").read_bytes():
                continue
            for pid in [*children.get(shell, []), shell]:
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def watch_workers() -> Iterator[None]:
    """While open, a local Beam worker process that exits with an error raises a
    `RunnerError` in the main thread, and one that lingers after the job is killed. A
    no-op off the main thread, where signal handlers cannot be installed (nmtpipe used
    as a library from a thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    deaths: list[str] = []
    closing = threading.Event()  # set when the workers are killed on purpose
    main = threading.main_thread().ident
    previous_hook = threading.excepthook
    previous_stop = worker_handlers.SubprocessSdkWorkerHandler.stop_worker

    def hook(args: threading.ExceptHookArgs) -> None:
        if closing.is_set():  # workers killed on purpose: their threads here fail too
            return
        thread = args.thread
        if thread is not None and thread.name == _WORKER_THREAD and main is not None:
            deaths.append(str(args.exc_value))
            if len(deaths) == 1:  # the workers stopped next end with errors too
                _stop_workers()
                signal.pthread_kill(main, _WAKE)
        else:
            previous_hook(args)

    def wake(signum: int, frame: FrameType | None) -> None:
        raise RunnerError(worker_death(deaths[0]))

    def stop_worker(handler: worker_handlers.SubprocessSdkWorkerHandler) -> None:
        handler.worker_thread.join(CLOSE_GRACE_SECONDS)
        if handler.worker_thread.is_alive():
            closing.set()
            _stop_workers()
            handler.worker_thread.join()

    previous_handler = signal.signal(_WAKE, wake)
    threading.excepthook = hook
    worker_handlers.SubprocessSdkWorkerHandler.stop_worker = stop_worker  # type: ignore[method-assign]
    try:
        yield
    finally:
        worker_handlers.SubprocessSdkWorkerHandler.stop_worker = previous_stop  # type: ignore[method-assign]
        threading.excepthook = previous_hook
        signal.signal(_WAKE, previous_handler)
