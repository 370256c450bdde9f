"""Ctrl-C as a terminal sends it (SIGINT to its foreground process group), in a
pseudo-terminal: one true line, exit 130, nothing printed once the command has
returned, and a rerun that says where it resumes."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from nmtpipe.trainers.runtime import checkpoint
from tests.helpers import encode_example, example_lines, write_pair
from tests.terminal import Terminal, lines

NMTPIPE = [sys.executable, "-m", "nmtpipe"]


@pytest.mark.slow
def test_ctrl_c_in_training_on_two_ranks_is_one_true_line(tmp_path):
    encoded = encode_example(tmp_path)
    save_dir = tmp_path / "ckpt"
    args = [*NMTPIPE, "train", "--data", encoded, "--save-dir", str(save_dir),
            "--arch", "transformer_tiny", "--max-tokens", "256", "--nproc", "2",
            "--save-interval-updates", "2", "--validate-interval-updates", "1000"]  # fmt: skip
    terminal = Terminal([*args, "--max-update", "100000"], tmp_path)
    last = save_dir / "checkpoint_last.pt"
    while not last.exists() and terminal.proc.poll() is None:
        time.sleep(0.1)
    assert terminal.proc.poll() is None, terminal.output()
    terminal.ctrl_c()
    code = terminal.wait()
    assert terminal.holders() == []  # no rank left to print after the prompt
    seen = terminal.output()
    assert code == 130, seen
    assert "Traceback" not in seen and "Error" not in seen
    # Nothing but the bar (its last state, where ^C was echoed) and the one line.
    (line,) = [shown for shown in lines(seen) if not shown.startswith("train:")]
    said = re.fullmatch(
        rf"nmtpipe train: interrupted at update (\d+); checkpoint at update (\d+) kept in "
        rf"{re.escape(str(save_dir))}; rerun to resume",
        line,
    )
    assert said, line
    kept = int(said.group(2))
    assert 2 <= kept <= int(said.group(1))
    assert checkpoint.load(str(last))["position"]["update"] == kept
    # The rerun says where it resumes, and goes on from there.
    rerun = subprocess.run(
        [*args, "--max-update", str(kept + 2)], capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming from the checkpoint at update {kept} ({last})" in rerun.stderr
    assert f"trained to update {kept + 2} " in rerun.stderr


def test_ctrl_c_in_prepare_in_this_process_is_one_true_line(tmp_path):
    """The default for a small corpus: the Beam job runs in the command's own process,
    where ^C lands inside a DoFn (Beam wraps it as its own error)."""
    corpus = write_pair(
        tmp_path / "train",
        example_lines("tatoeba-cmn", "en"),
        example_lines("tatoeba-cmn", "zh"),
    )
    out = tmp_path / "prepared"
    terminal = Terminal([*NMTPIPE, "prepare", "-s", "en", "-t", "zh", "--trainpref", str(corpus),
                         "--output", str(out)], tmp_path)  # fmt: skip
    # Once a reader of the job has told what it read, the job is running.
    while not list(out.glob(".nmtpipe/read-*/*")) and terminal.proc.poll() is None:
        time.sleep(0.05)
    assert terminal.proc.poll() is None, terminal.output()
    terminal.ctrl_c()
    code = terminal.wait()
    seen = terminal.output()
    assert code == 130, seen
    assert "Traceback" not in seen and "Error" not in seen
    assert lines(seen)[-1] == (
        "nmtpipe prepare: interrupted while Beam ran Prepare; it committed nothing"
    )
    assert not out.exists()  # no output folder, no staging left
