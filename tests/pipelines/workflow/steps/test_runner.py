"""The one skeleton of the Beam steps, with a step that builds without Beam: Beam's
options checked first, a committed result reused, else built, and the outcome."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from nmtpipe import __version__
from nmtpipe.pipelines.workflow.steps.beam_steps import BeamStep
from nmtpipe.pipelines.workflow.steps.protocol import Written
from nmtpipe.pipelines.workflow.steps.runner import run_step, run_steps
from nmtpipe.transforms.errors import ConfigError, OutputError
from nmtpipe.transforms.storage import fsio, manifest
from tests.helpers import IN_MEMORY


class Counting(BeamStep):
    """Writes one file on the driver, keeps statistics; counts its builds."""

    kind = "nmtpipe.test"
    ours = re.compile("^data.txt$")
    builds = 0

    def __init__(self, output: str, fingerprint: str = "f" * 64) -> None:
        self.output, self.fingerprint = output, fingerprint

    def announce(self, runner, options):
        return f"counting into {self.output} on {runner}"

    def write(self, summary, log):
        assert summary is None  # no graph
        Counting.builds += 1
        written = fsio.write_bytes(fsio.join(self.output, "data.txt"), b"data")
        return Written([manifest.file_entry(self.output, written, "data", 1)], {"pairs": 1})

    def manifest(self, files, stats):
        return {"stats": manifest.STATS_FILE, "files": files}  # the commit adds the header


def test_a_step_is_built_once_then_reused(tmp_path):
    out = str(tmp_path / "out")
    Counting.builds = 0
    built = run_step(lambda: Counting(out), IN_MEMORY)
    assert (built.cached, built.runner, built.stats, Counting.builds) == (
        False,
        "the driver",
        {"pairs": 1},
        1,
    )
    assert sorted(f["path"] for f in built.manifest["files"]) == ["data.txt", "stats.json"]
    header = {k: built.manifest[k] for k in ("kind", "code_version", "fingerprint")}
    assert header == {"kind": "nmtpipe.test", "code_version": __version__, "fingerprint": "f" * 64}
    assert datetime.fromisoformat(built.manifest["created"]).utcoffset().total_seconds() == 0
    again = run_step(lambda: Counting(out), IN_MEMORY)
    assert (again.cached, again.runner, again.stats, Counting.builds) == (
        True,
        "cached",
        {"pairs": 1},
        1,
    )
    assert again.manifest == built.manifest
    with pytest.raises(OutputError, match=r"already holds a nmtpipe\.test result"):
        run_step(lambda: Counting(out, "e" * 64), IN_MEMORY)
    assert not run_step(lambda: Counting(out, "e" * 64), IN_MEMORY, replace=True).cached
    assert not run_step(lambda: Counting(out, "e" * 64), IN_MEMORY, force=True).cached


def test_bad_beam_options_fail_before_the_step_is_planned(tmp_path):
    planned = []
    with pytest.raises(ConfigError, match="--runnner"):
        run_step(lambda: planned.append(1) or Counting(str(tmp_path)), ["--runnner=X"])
    assert planned == []


def test_the_created_stamp_is_utc_to_the_second():
    stamp = manifest.created_stamp()
    assert stamp.endswith("+00:00") and datetime.fromisoformat(stamp).microsecond == 0


def test_several_steps_run_once_each_and_report_each(tmp_path):
    outs = [str(tmp_path / "a"), str(tmp_path / "b")]
    run_steps([lambda: Counting(outs[0])], IN_MEMORY)
    Counting.builds = 0
    said = []
    both = run_steps([lambda out=out: Counting(out) for out in outs], IN_MEMORY, log=said.append)
    assert [(o.output, o.cached, o.runner) for o in both] == [
        (outs[0], True, "cached"),
        (outs[1], False, "the driver"),
    ]
    assert Counting.builds == 1 and said == [f"counting into {outs[1]} on the driver"]


class Interrupted(Counting):
    """Writes its file and a staging file, then the user presses Ctrl-C."""

    def write(self, summary, log):
        fsio.write_bytes(fsio.join(self.output, "data.txt"), b"data")
        fsio.write_bytes(fsio.join(self.output, ".nmtpipe", "summary.json"), b"{}")
        raise KeyboardInterrupt


@pytest.mark.parametrize("existed", [False, True])
def test_a_step_that_fails_leaves_nothing_it_began(tmp_path, existed):
    """Ctrl-C (or any failure) in a step: its uncommitted files, its staging folder and
    an output folder it made are removed; a folder that was there stays, with what else
    it holds."""
    out = tmp_path / "out"
    if existed:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    with pytest.raises(KeyboardInterrupt):
        run_step(lambda: Interrupted(str(out)), IN_MEMORY)
    if existed:
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    else:
        assert not out.exists()


def test_a_failure_spares_a_committed_result(tmp_path):
    """A result of other options is refused, not removed."""
    out = str(tmp_path / "out")
    run_step(lambda: Counting(out), IN_MEMORY)
    with pytest.raises(OutputError, match=r"already holds a nmtpipe\.test result"):
        run_step(lambda: Counting(out, "e" * 64), IN_MEMORY)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "data.txt", "manifest.json", "stats.json"
    ]  # fmt: skip
