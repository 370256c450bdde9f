"""A local worker process that dies must end the job, not hang it.

Beam's FnApiRunner waits forever for the answer of a worker process that died before it
connected (killed for memory, a failed import, a crash while starting: tried, a worker
made to exit at start-up hung `nmtpipe prepare` until it was killed), and reports one
that dies later as `Channel closed prematurely`, which says nothing of why.

While `watch_workers` is open, the first local worker that ends badly (`worker_ended`,
called by `local_runner`'s worker handler) stops this run's other workers (a worker
still connected never exits once the job is interrupted: tried) and interrupts the main
thread with a `RunnerError` naming the exit code, the signal behind it if any, and where
to see the worker's own output.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from nmtpipe.pipelines.beam.forked_workers import FORKS
from nmtpipe.transforms.errors import RunnerError

_WAKE = signal.SIGUSR1
# While a watch is open: the exit codes of the workers that ended badly, in order.
_deaths: list[int] | None = None
_lock = threading.Lock()


def worker_death(code: int) -> str:
    """The line a user reads when a worker ended with `code` (-N: killed by signal N)."""
    said = str(code)
    if code < 0:
        with contextlib.suppress(ValueError):
            said += f", killed by {signal.Signals(-code).name}"
            if -code == signal.SIGKILL:
                said += ": out of memory?"
    return (
        f"a Beam worker process on this machine ended (return code {said}) before the job "
        "did; nothing was committed (run again with --verbose to see its output)"
    )


def worker_ended(code: int) -> None:
    """A local worker ended with `code` while its run still needed it. The first bad
    end under a watch stops the other workers and wakes the main thread; others, and
    any end without a watch (the run is over), change nothing."""
    with _lock:
        if code == 0 or _deaths is None:
            return
        _deaths.append(code)
        if len(_deaths) > 1:  # the workers stopped next end badly too
            return
    FORKS.stop_all(timeout=0)
    main = threading.main_thread().ident
    if main is not None:
        signal.pthread_kill(main, _WAKE)


@contextlib.contextmanager
def watch_workers() -> Iterator[None]:
    """While open, a local Beam worker process that ends badly raises a `RunnerError`
    in the main thread. A no-op off the main thread, where signal handlers cannot be
    installed (nmtpipe used as a library from a thread)."""
    global _deaths
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def wake(signum: int, frame: FrameType | None) -> None:
        assert _deaths
        raise RunnerError(worker_death(_deaths[0]))

    previous_handler = signal.signal(_WAKE, wake)
    with _lock:
        _deaths = []
    try:
        yield
    finally:
        with _lock:
            died, _deaths = bool(_deaths), None
        if died:  # a worker started while the first death stopped the others
            FORKS.stop_all(timeout=0)
        signal.signal(_WAKE, previous_handler)
