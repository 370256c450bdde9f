"""What a long step shows while it works, on stderr: the command line's display of the
progress every step reports (`transforms/progress.py`).

On a terminal a tqdm bar (count, rate, ETA); when stderr is a file or a pipe (cron, CI,
a scheduler's log) one plain line per interval with the same figures, each stamped with
the time it was written, so logs stay readable; nothing at all with `--quiet`. Notes
(one-off lines such as "preparing 3 inputs on FnApiRunner") follow the same switch and
are stamped the same way in a log. `main` installs it once per command;
torch jobs carry it to their ranks (`rank.py`). stdout is never written here: it
carries each command's result.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from tqdm import tqdm

from nmtpipe.transforms import progress
from nmtpipe.transforms.progress import BYTES


@dataclass
class Terminal(progress.Display):
    """The command line's display (installed in `transforms/progress.py`): `quiet` shows
    nothing; `interval` is the seconds between plain lines when stderr is not a terminal."""

    quiet: bool = False
    interval: float = 30.0

    def note(self, message: str) -> None:
        if self.quiet:
            return
        if sys.stderr.isatty():  # above a bar, which is drawn again below it
            tqdm.write(message, file=sys.stderr)
        else:
            print(stamped(message), file=sys.stderr, flush=True)

    def bar(
        self, what: str, total: int | None, unit: str, initial: int, stream: TextIO | None
    ) -> Bar | None:
        if self.quiet:
            return None
        return Bar(what, total, unit, initial, stream or sys.stderr, self.interval)


def stamped(line: str) -> str:
    """A line of a log, after the local time it was written (to the second)."""
    return f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}"


def install(quiet: bool) -> None:
    """Show this process's progress on the terminal (nothing if `quiet`)."""
    progress.install(Terminal(quiet=quiet))


class Bar:
    """Progress of `what` over `total` units on `stream`: a tqdm bar if it is a terminal,
    a plain line per `interval` seconds otherwise. Closing prints a last line in plain
    mode, so a log shows where it ended."""

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str,
        initial: int,
        stream: TextIO,
        interval: float,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.n = initial
        self._initial = initial
        self._figures: dict[str, Any] = {}
        self._bar: tqdm | None = None
        self._stream, self._interval = stream, interval
        self._plain = not stream.isatty()
        self._shown: int | None = None  # the count of the last plain line
        self._scaled = unit == BYTES  # 1.2 MB, 30.5 kB/s
        if self._plain:
            self._started = self._last = time.monotonic()
            if unit and total is not None:  # a log has the total from the start
                self._line()
        else:
            self._bar = tqdm(
                total=total, initial=initial, desc=what, unit=unit, file=stream,
                dynamic_ncols=True, leave=False, unit_scale=self._scaled,
                bar_format=None if unit else "{desc}: {elapsed} elapsed",
            )  # fmt: skip

    @property
    def period(self) -> float:
        """How often a heartbeat updates it: a bar each second, plain lines per interval."""
        return 1.0 if self._bar is not None else max(self._interval, 1.0)

    def update(self, n: int = 1, **figures: Any) -> None:
        self.n += n
        self._figures.update(figures)
        if self._bar is not None:
            if figures:
                self._bar.set_postfix(self._figures, refresh=False)
            self._bar.update(n) if n else self._bar.refresh()
        elif self._plain and time.monotonic() - self._last >= self._interval:
            self._line()

    def _line(self) -> None:
        self._last, self._shown = time.monotonic(), self.n
        print(stamped(self.line(self._last - self._started)), file=self._stream, flush=True)

    def line(self, elapsed: float) -> str:
        """The plain line (after its time stamp): `what: n/total unit [elapsed<eta,
        rate unit/s] figures`."""
        if not self.unit:  # nothing to count: how long it has been running
            return f"{self.what}: {tqdm.format_interval(elapsed)} elapsed"
        done = self.n - self._initial
        rate = done / elapsed if elapsed > 0 else None
        text = tqdm.format_meter(
            self.n, self.total, elapsed, prefix=self.what, unit=self.unit, rate=rate,
            ncols=0, unit_scale=self._scaled,
        )  # fmt: skip
        figures = ", ".join(f"{k}={v}" for k, v in self._figures.items())
        return f"{text} {figures}".rstrip()

    def close(self, finished: bool = True) -> None:
        """End the display; in plain mode a last line shows where a finished step ended
        (a failed one ends with its error instead), unless the last line already did."""
        if self._bar is not None:
            if finished:  # where it ended, drawn even when the work outran tqdm's interval
                self._bar.refresh()
            self._bar.close()
            self._bar = None
        elif self._plain:
            if finished and not (self.unit and self._shown == self.n):
                self._line()
            self._plain = False
