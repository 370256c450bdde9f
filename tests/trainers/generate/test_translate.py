"""`nmtpipe translate`'s progress: with files to translate, their count in a bar from the
first second (on the terminal its translations do not go to); from a pipe, no bar."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import example_lines
from tests.terminal import Terminal, lines

NMTPIPE = [sys.executable, "-m", "nmtpipe"]
SHORT = ["--max-len-a", "0", "--max-len-b", "4", "--max-tokens", "64"]
NEWS = 30


@pytest.fixture
def news(tmp_path) -> Path:
    path = tmp_path / "news.en"
    path.write_text("\n".join(example_lines("ntrex128-enzh", "en", NEWS)) + "\n", "utf-8")
    return path


@pytest.mark.parametrize("given", ["input", "stdin"])
def test_files_to_translate_are_counted_before_the_model_loads(tiny_model, tmp_path, news, given):
    command = [*NMTPIPE, "translate", "--checkpoint", tiny_model["checkpoint"], *SHORT]
    out = tmp_path / "news.zh"
    with out.open("wb") as translations:
        if given == "input":
            terminal = Terminal([*command, "--input", str(news)], tmp_path, translations)
        else:  # `nmtpipe translate < news.en > news.zh`: stdin a file, rewound once counted
            with news.open("rb") as stdin:
                terminal = Terminal(command, tmp_path, translations, stdin)
        assert terminal.wait() == 0
    seen = terminal.output()
    loading = f"loading the checkpoint {tiny_model['checkpoint']}"
    assert seen.index(f"0/{NEWS}") < seen.index(loading)
    assert f"{NEWS}/{NEWS}" in seen and "sentence/s" in seen
    assert lines(seen)[-1] == f"translated {NEWS} sentences"
    assert len(out.read_text("utf-8").splitlines()) == NEWS


def test_lines_from_a_pipe_get_no_bar(tiny_model, news):
    done = subprocess.run(
        [*NMTPIPE, "translate", "--checkpoint", tiny_model["checkpoint"], *SHORT],
        input=news.read_bytes(), capture_output=True, timeout=300, check=True,
    )  # fmt: skip
    assert done.stderr.decode().splitlines() == [f"translated {NEWS} sentences"]
    assert len(done.stdout.decode().splitlines()) == NEWS
