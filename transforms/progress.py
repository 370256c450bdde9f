"""How a long step reports its progress, whatever shows it.

Library code (a vocabulary build, a Beam pipeline's run, training, decoding) says what
it is doing through `note`, `Progress` and `heartbeat`; what anyone sees of it is the
business of the `Display` installed in the process. The command line installs its
terminal display (`pipelines/cli/display.py`: a bar on a terminal, plain lines
otherwise, nothing with --quiet), in its own process and in each torch rank it starts;
with none installed (nmtpipe used as a library, a worker process) nothing is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol, TextIO


class Bar(Protocol):
    """One counted piece of work as a display shows it."""

    def update(self, n: int, **figures: Any) -> None: ...

    def close(self, finished: bool) -> None: ...


class Display(Protocol):
    """What shows progress in a process. A torch job pickles the installed display to
    its ranks, so a display holds its settings only (no open streams, no threads)."""

    def note(self, message: str) -> None: ...

    def bar(
        self, what: str, total: int | None, unit: str, initial: int, stream: TextIO | None
    ) -> Bar | None: ...

    def heartbeat(
        self,
        what: str,
        done: Callable[[], int] | None,
        total: int | None,
        stream: TextIO | None,
    ) -> AbstractContextManager[None]: ...


class Silent:
    """The display of a process that installed none: nothing is shown."""

    def note(self, message: str) -> None:
        pass

    def bar(
        self, what: str, total: int | None, unit: str, initial: int, stream: TextIO | None
    ) -> Bar | None:
        return None

    def heartbeat(
        self,
        what: str,
        done: Callable[[], int] | None,
        total: int | None,
        stream: TextIO | None,
    ) -> AbstractContextManager[None]:
        return nullcontext()


_display: Display = Silent()


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


def heartbeat(
    what: str,
    done: Callable[[], int] | None = None,
    total: int | None = None,
    stream: TextIO | None = None,
) -> AbstractContextManager[None]:
    """Around work that reports nothing until it ends (a Beam pipeline): `what` and the
    elapsed time and, given `done`, how many of `total` units are done so far."""
    return _display.heartbeat(what, done, total, stream)
