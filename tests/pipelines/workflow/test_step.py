"""The one skeleton of the Beam steps, with a step that builds without Beam: Beam's
options checked first, a committed result reused, else built, and the outcome."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from nmtpipe.pipelines.workflow.step import Step, run_step
from nmtpipe.transforms.errors import ConfigError, OutputError
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import commit
from tests.helpers import IN_MEMORY


class Counting(Step):
    """Writes one file and its statistics; counts its builds."""

    kind = "nmtpipe.test"
    builds = 0

    def __init__(self, output: str, fingerprint: str = "f" * 64) -> None:
        self.output, self.fingerprint = output, fingerprint

    def build(self, beam_args, log, quiet):
        Counting.builds += 1
        written = fsio.write_bytes(fsio.join(self.output, "data.txt"), b"data")
        stats = {"pairs": 1}
        fsio.write_bytes(fsio.join(self.output, manifest.STATS_FILE), json.dumps(stats).encode())
        doc = {
            "kind": self.kind,
            "created": manifest.created_stamp(),
            "fingerprint": self.fingerprint,
            "files": [manifest.file_entry(self.output, written, "data", 1)],
        }
        return commit(self.output, self.kind, doc, re.compile("^data.txt$")), stats, "here"


def test_a_step_is_built_once_then_reused(tmp_path):
    out = str(tmp_path / "out")
    Counting.builds = 0
    built = run_step(lambda: Counting(out), IN_MEMORY)
    assert (built.cached, built.runner, built.stats, Counting.builds) == (
        False,
        "here",
        {"pairs": 1},
        1,
    )
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
