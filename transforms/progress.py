"""How a long step reports its progress, whatever shows it.

Library code (a vocabulary build, a Beam pipeline's run, training, decoding) says what
it is doing through `note`, `Progress` and `heartbeat`; what anyone sees of it is the
business of the `Display` installed in the process. The command line installs its
terminal display (`pipelines/cli/display.py`: a bar on a terminal, plain lines
otherwise, nothing with --quiet), in its own process and in each torch rank it starts;
with none installed (nmtpipe used as a library, a worker process) nothing is shown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO

# The unit of a count of bytes (a display shows it scaled: 1.2 MB, 30.5 kB/s).
BYTES = "B"


class Bar(Protocol):
    """One counted piece of work as a display shows it; `period`: how often, in seconds,
    a heartbeat updates it."""

    period: float

    def update(self, n: int, **figures: Any) -> None: ...

    def close(self, finished: bool) -> None: ...


class Display:
    """What shows progress in a process; this one shows nothing (the default: nmtpipe
    used as a library, a worker process). A torch job pickles the installed display to
    its ranks, so a display holds its settings only (no open streams, no threads)."""

    def note(self, message: str) -> None:
        pass

    def bar(
        self, what: str, total: int | None, unit: str, initial: int, stream: TextIO | None
    ) -> Bar | None:
        return None


_display = Display()


def install(display: Display) -> None:
    """Show this process's progress with `display` from now on."""
    global _display
    _display = display


def installed() -> Display:
    return _display


def note(message: str) -> None:
    """A one-off progress line (not an error: errors are shown whatever the display)."""
    _display.note(message)


class Progress:
    """Progress of `what` over `total` units (None: unknown); with no `unit`, only the
    time it has been running. `update(n, **figures)` advances it; figures (a loss, say)
    are shown beside the count. `enabled=False` shows nothing (a rank other than the
    first); `stream` is where the user's stderr is, when it is not sys.stderr."""

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str = "it",
        initial: int = 0,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self._bar = _display.bar(what, total, unit, initial, stream) if enabled else None

    def update(self, n: int = 1, **figures: Any) -> None:
        if self._bar is not None:
            self._bar.update(n, **figures)

    def close(self, finished: bool = True) -> None:
        """End it; `finished=False` for a step that failed (its error ends it)."""
        if self._bar is not None:
            self._bar.close(finished)
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close(finished=kind is None)


@contextmanager
def heartbeat(
    what: str,
    done: Callable[[], int] | None = None,
    total: int | None = None,
    stream: TextIO | None = None,
    unit: str = "task",
) -> Iterator[None]:
    """While the body runs (work that reports nothing until it ends: a Beam pipeline),
    `what` with the elapsed time and, given `done`, how many of `total` `unit`s are
    done (polled once per the bar's period; never shown past `total`, and all of it once
    the body has finished), on `stream` (default: stderr)."""
    bar = _display.bar(what, total, unit if done else "", 0, stream)
    if bar is None:
        yield
        return
    count = [0]

    def advance(to: int | None = None) -> None:
        step = _advance(done, count[0]) if to is None else max(to - count[0], 0)
        if total is not None:
            step = min(step, max(total - count[0], 0))
        count[0] += step
        bar.update(step)  # (with 0, a redraw: the elapsed time)

    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(bar.period):
            advance()

    thread = threading.Thread(target=poll, name=f"progress: {what}", daemon=True)
    thread.start()
    finished = False
    try:
        yield
        finished = True
    finally:
        stop.set()
        thread.join()
        if done is not None:
            advance(total if finished and total is not None else None)
        bar.close(finished)


def _advance(done: Callable[[], int] | None, shown: int) -> int:
    """How far `done` moved past `shown`; 0 when it cannot tell (a failed listing)."""
    if done is None:
        return 0
    try:
        return max(done() - shown, 0)
    except Exception:  # a progress display must never fail the step it watches
        return 0
