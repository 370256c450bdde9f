"""The command line's progress display: a bar on a terminal, plain lines otherwise,
nothing when quiet; and what shows progress where the command line installs none."""

from __future__ import annotations

import io
import pickle
import re

import pytest

from nmtpipe.pipelines.cli import display
from nmtpipe.transforms import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


def unstamped(text: str) -> list[str]:
    """A log's lines without their time stamps, each of which must be there."""
    lines = text.splitlines()
    assert all(STAMP.match(line) for line in lines), lines
    return [STAMP.sub("", line, count=1) for line in lines]


@pytest.fixture(autouse=True)
def settings():
    before = progress.installed()
    yield
    progress.install(before)


def test_plain_lines_carry_count_rate_and_figures():
    progress.install(display.Terminal(interval=0.0))  # a line per update
    log = io.StringIO()
    with progress.Progress("decode", 4, "sentence", stream=log) as shown:
        shown.update(2, loss="1.5")
        shown.update(2)
    lines = unstamped(log.getvalue())
    assert len(lines) == 3  # the start, two updates; a closing line would repeat the last
    assert lines[0].startswith("decode:   0%") and "0/4" in lines[0]  # the total, at once
    assert lines[1].startswith("decode:  50%") and "2/4" in lines[1] and "loss=1.5" in lines[1]
    assert "sentence/s" in lines[-1] and "4/4" in lines[-1] and "\r" not in log.getvalue()


def test_plain_lines_come_once_per_interval():
    progress.install(display.Terminal(interval=3600.0))
    log = io.StringIO()
    with progress.Progress("train", 100, "update", stream=log) as shown:
        for _ in range(100):
            shown.update(1)
    assert log.getvalue().count("\n") == 2  # the start and the end, within the hour


def test_the_closing_line_comes_when_the_count_moved_since_the_last_line():
    # A decode of unknown length whose last batch came as an interval ended: the closing
    # line said the same again ("decode: 1997sentence [00:36, ...]" twice).
    progress.install(display.Terminal(interval=0.0))
    log = io.StringIO()
    with progress.Progress("decode", None, "sentence", stream=log) as shown:
        shown.update(5)
    lines = unstamped(log.getvalue())
    assert len(lines) == 1 and lines[0].startswith("decode: 5sentence")
    # Nothing counted: the closing line says how long it took.
    progress.Progress("prepare", None, "", stream=log).close()
    assert re.fullmatch(r"prepare: \d\d:\d\d elapsed", unstamped(log.getvalue())[-1])


def test_a_failed_step_ends_without_a_closing_line():
    progress.install(display.Terminal(interval=3600.0))
    log = io.StringIO()
    with pytest.raises(OSError), progress.Progress("encode", 3, "part", stream=log):
        raise OSError("disk full")
    (start,) = unstamped(log.getvalue())  # the total, at the start; no closing line
    assert start.startswith("encode:   0% 0/3 ")


def test_a_terminal_gets_a_bar_and_quiet_gets_nothing(capsys):
    display.install(quiet=False)
    terminal = Terminal()
    with progress.Progress("train", 10, "update", stream=terminal) as shown:
        shown.update(5)
    assert "train:" in terminal.getvalue() and "\r" in terminal.getvalue()
    assert not STAMP.search(terminal.getvalue())  # a person at a terminal sees the time
    progress.note("a note")  # (stderr is captured here: a log)
    assert unstamped(capsys.readouterr().err) == ["a note"]
    display.install(quiet=True)
    silent = Terminal()
    with progress.Progress("train", 10, "update", stream=silent) as shown:
        shown.update(5)
    progress.note("a note")
    with progress.heartbeat("encode", stream=silent):
        pass
    assert silent.getvalue() == "" and capsys.readouterr().err == ""


def test_heartbeat_reports_what_is_done_and_survives_a_failing_probe():
    progress.install(display.Terminal(interval=0.0))
    log = io.StringIO()
    done = [0]
    with progress.heartbeat("encode", lambda: done[0], total=3, stream=log):
        done[0] = 3  # the work the body does, as the probe sees it
    assert "3/3" in unstamped(log.getvalue())[-1]
    log = io.StringIO()
    with progress.heartbeat("Prepare on FnApiRunner", stream=log):
        pass
    assert unstamped(log.getvalue()) == ["Prepare on FnApiRunner: 00:00 elapsed"]

    def broken() -> int:
        raise OSError("listing failed")

    log = io.StringIO()
    with progress.heartbeat("encode", broken, total=3, stream=log):
        pass
    assert "0/3" in log.getvalue()


def test_without_a_display_nothing_is_shown(capsys):
    progress.install(progress.Display())
    log = Terminal()
    with progress.Progress("decode", 4, "sentence", stream=log) as shown:
        shown.update(4)
    with progress.heartbeat("encode", lambda: 1, total=3, stream=log):
        pass
    progress.note("a note")
    assert log.getvalue() == "" and capsys.readouterr().err == ""


def test_the_display_travels_to_torch_ranks_with_its_settings():
    shown = pickle.loads(pickle.dumps(display.Terminal(quiet=True, interval=5.0)))
    assert shown == display.Terminal(quiet=True, interval=5.0)
