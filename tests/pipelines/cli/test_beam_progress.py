"""What a Beam step shows as it runs, as a person sees it: on a terminal a bar of the
input read against the inputs' size with rate and ETA; in a log time-stamped lines with
the same figures, the first with the total at once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tqdm import tqdm

from tests.helpers import example_lines, write_pair
from tests.terminal import Terminal

NMTPIPE = [sys.executable, "-m", "nmtpipe"]
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


def _prepare(folder: Path, out: str) -> tuple[list[str], str]:
    """The command that prepares a quarter of the example corpus, and its inputs' size
    as the bar shows it (`492k`)."""
    corpus = write_pair(
        folder / "train",
        example_lines("tatoeba-cmn", "en")[::4],
        example_lines("tatoeba-cmn", "zh")[::4],
    )
    size = sum(Path(f"{corpus}.{lang}").stat().st_size for lang in ("en", "zh"))
    command = [*NMTPIPE, "prepare", "-s", "en", "-t", "zh", "--trainpref", str(corpus),
               "--output", str(folder / out)]  # fmt: skip
    return command, tqdm.format_sizeof(size)


def test_a_beam_step_on_a_terminal_shows_the_input_read_with_rate_and_eta(tmp_path):
    command, total = _prepare(tmp_path, "prepared")
    terminal = Terminal(command, tmp_path)
    assert terminal.wait() == 0
    seen = terminal.output()
    redraws = [r.strip() for r in re.split(r"[\r\n]", seen) if r.startswith("Prepare on")]
    assert redraws[0].startswith("Prepare on FnApiRunner:   0%")
    assert f"0.00/{total} [00:00<?, ?B/s]" in redraws[0]  # the total from the start
    last = redraws[-1]
    assert last.startswith("Prepare on FnApiRunner: 100%"), last
    assert re.search(rf"{total}/{total} \[\d\d:\d\d<00:00, +[\d.]+[kM]?B/s\]", last), last


def test_a_beam_step_in_a_log_writes_time_stamped_lines_with_the_total(tmp_path):
    command, total = _prepare(tmp_path, "prepared")
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    shown = [
        STAMP.sub("", line, count=1)
        for line in done.stderr.splitlines()
        if STAMP.match(line) and "Prepare on" in line
    ]
    assert shown[0] == f"Prepare on FnApiRunner:   0% 0.00/{total} [00:00<?, ?B/s]"
    assert shown[-1].startswith(f"Prepare on FnApiRunner: 100% {total}/{total} ["), shown
