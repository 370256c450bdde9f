"""A local worker process that dies must end the job, not hang it.

With `--direct_running_mode=multi_processing` Beam's FnApiRunner starts each worker
process from a thread of its own (named `run_worker`), which raises `RuntimeError:
Worker subprocess exited with return code N` when the process ends badly. Nothing
passes that on: a worker that dies before it connects (killed for memory, a failed
import, a crash while starting) leaves the runner waiting for its answer forever, with
no output at all (tried: a worker made to exit at start-up hung `nmtpipe prepare` until
it was killed). A worker that dies later closes its channel and the runner fails, but
with `Channel closed prematurely`, which says nothing of why.

`worker_deaths_raise` watches for that thread's failure, stops this run's other worker
processes (Beam's clean-up waits for each to exit, and a worker that is still connected
never does once the job is interrupted: tried) and interrupts the main thread with a
`RunnerError` naming the return code, the signal behind it if any, and where to see the
worker's own output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from nmtpipe.transforms.errors import RunnerError

# The name Beam gives the thread that starts and waits on a local worker process
# (`SubprocessSdkWorkerHandler.start_worker`), and the module that process runs, in a
# shell of its own (`sh -c '<python> -m apache_beam.runners.worker.sdk_worker_main'`).
_WORKER_THREAD = "run_worker"
_WORKER_MAIN = b"apache_beam.runners.worker.sdk_worker_main"
_WAKE = signal.SIGUSR1


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
def worker_deaths_raise() -> Iterator[None]:
    """While open, a local Beam worker process that exits with an error raises a
    `RunnerError` in the main thread. A no-op off the main thread, where signal
    handlers cannot be installed (nmtpipe used as a library from a thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    deaths: list[str] = []
    main = threading.main_thread().ident
    previous_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
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

    previous_handler = signal.signal(_WAKE, wake)
    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous_hook
        signal.signal(_WAKE, previous_handler)
