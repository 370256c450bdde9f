"""What a long step shows while it works, on stderr: the one display every step uses.

On a terminal a tqdm bar (count, rate, ETA); when stderr is a file or a pipe (cron, CI,
a scheduler's log) one plain line per interval with the same figures, so logs stay
readable; nothing at all with `--quiet`. Notes (one-off lines such as "preparing 3
inputs on FnApiRunner") follow the same switch. The command line sets the switch once
(`configure`); torch jobs carry it to their ranks. stdout is never written here: it
carries each command's machine-readable result.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from tqdm import tqdm


@dataclass
class _Settings:
    quiet: bool = False
    interval: float = 30.0  # seconds between plain lines when stderr is not a terminal


_SETTINGS = _Settings()


def configure(quiet: bool, interval: float | None = None) -> None:
    """Set how progress is shown in this process (the command line calls it once)."""
    _SETTINGS.quiet = quiet
    if interval is not None:
        _SETTINGS.interval = interval


def quiet() -> bool:
    return _SETTINGS.quiet


def _stream() -> TextIO:
    return sys.stderr


def note(message: str) -> None:
    """A one-off progress line (not an error: errors are shown whatever the switch)."""
    if not _SETTINGS.quiet:
        print(message, file=_stream(), flush=True)


class Progress:
    """Progress of `what` over `total` units (None: unknown), drawn as the module says;
    with no `unit`, only the time it has been running.

    `update(n, **figures)` advances it; figures (a loss, say) are shown beside the
    count. Closing prints a last line in plain mode, so a log shows where it ended.
    """

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str = "it",
        initial: int = 0,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.n = initial
        self._initial = initial
        self._figures: dict[str, Any] = {}
        self._bar: tqdm | None = None
        self._plain = False
        self._stream = stream or _stream()
        if not enabled or _SETTINGS.quiet:
            return
        if self._stream.isatty():
            self._bar = tqdm(
                total=total, initial=initial, desc=what, unit=unit, file=self._stream,
                dynamic_ncols=True, leave=False,
                bar_format=None if unit else "{desc}: {elapsed} elapsed",
            )  # fmt: skip
        else:
            self._plain = True
            self._started = self._last = time.monotonic()

    def update(self, n: int = 1, **figures: Any) -> None:
        self.n += n
        self._figures.update(figures)
        if self._bar is not None:
            if figures:
                self._bar.set_postfix(self._figures, refresh=False)
            self._bar.update(n) if n else self._bar.refresh()
        elif self._plain and time.monotonic() - self._last >= _SETTINGS.interval:
            self._line()

    def _line(self) -> None:
        self._last = time.monotonic()
        print(self.line(self._last - self._started), file=self._stream, flush=True)

    def line(self, elapsed: float) -> str:
        """The plain line: `what: n/total unit [elapsed<eta, rate unit/s] figures`."""
        if not self.unit:  # nothing to count: how long it has been running
            return f"{self.what}: {tqdm.format_interval(elapsed)} elapsed"
        done = self.n - self._initial
        rate = done / elapsed if elapsed > 0 else None
        text = tqdm.format_meter(
            self.n, self.total, elapsed, prefix=self.what, unit=self.unit, rate=rate,
            ncols=0,
        )  # fmt: skip
        figures = ", ".join(f"{k}={v}" for k, v in self._figures.items())
        return f"{text} {figures}".rstrip()

    def close(self, finished: bool = True) -> None:
        """End the display; in plain mode a last line shows where a finished step ended
        (a failed one ends with its error instead)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._plain:
            if finished:
                self._line()
            self._plain = False

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
) -> Iterator[None]:
    """While the body runs (a Beam pipeline, which reports nothing until it ends), show
    `what` with the elapsed time and, given `done`, how many of `total` units are done
    (polled once per interval), on `stream` (default: stderr)."""
    if _SETTINGS.quiet:
        yield
        return
    progress = Progress(what, total, "task" if done else "", stream=stream)
    stop = threading.Event()

    def poll() -> None:
        period = 1.0 if progress._bar is not None else max(_SETTINGS.interval, 1.0)
        while not stop.wait(period):
            progress.update(_advance(done, progress.n))

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
            progress.update(_advance(done, progress.n))
        progress.close(finished)


def _advance(done: Callable[[], int] | None, shown: int) -> int:
    """How far `done` moved past `shown`; 0 when it cannot tell (a failed listing)."""
    if done is None:
        return 0
    try:
        return max(done() - shown, 0)
    except Exception:  # a progress display must never fail the step it watches
        return 0
