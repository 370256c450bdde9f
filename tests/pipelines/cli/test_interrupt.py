"""Ctrl-C as a terminal sends it (SIGINT to its foreground process group), in a
pseudo-terminal: one true line, exit 130, nothing printed once the command has
returned, and a rerun that says where it resumes."""

from __future__ import annotations

import os
import re
import signal
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


def _prepare_running(tmp_path, *beam_args: str) -> tuple[subprocess.Popen, object]:
    """`nmtpipe prepare` of the example corpus in its own process, its temporary folder
    in `tmp_path/tmp`, once its job runs (a reader has told what it read)."""
    corpus = write_pair(
        tmp_path / "train",
        example_lines("tatoeba-cmn", "en"),
        example_lines("tatoeba-cmn", "zh"),
    )
    out = tmp_path / "prepared"
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    cmd = [*NMTPIPE, "prepare", "-s", "en", "-t", "zh", "--trainpref", str(corpus),
           "--output", str(out), *beam_args]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    while not list(out.glob(".nmtpipe/read-*/*")) and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    return proc, out


@pytest.mark.slow
def test_sigterm_in_prepare_is_taken_as_ctrl_c_and_leaves_nothing(tmp_path):
    proc, out = _prepare_running(
        tmp_path, "--runner=FnApiRunner", "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    )  # fmt: skip
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.splitlines()[-1] == (
        "nmtpipe prepare: terminated (SIGTERM) while Beam ran Prepare; it committed nothing"
    )
    assert "Traceback" not in err
    assert not out.exists()
    assert list((tmp_path / "tmp").iterdir()) == []  # no Beam folder, no spill


@pytest.mark.slow
def test_a_killed_prepare_s_beam_folder_goes_with_the_next_run(tmp_path):
    proc, _ = _prepare_running(tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    left = list((tmp_path / "tmp").glob("nmtpipe-beam-*/beam-pipeline-temp*"))
    assert left  # what SIGKILL leaves, where nmtpipe knows it
    proc, _ = _prepare_running(tmp_path)
    proc.communicate(timeout=300)
    assert proc.returncode == 0
    assert list((tmp_path / "tmp").glob("beam-pipeline-temp*")) == []
    assert list((tmp_path / "tmp").glob("nmtpipe-beam-*")) == []
