"""The probe of Beam's internals: this Beam passes it; a failed check, or
NMTPIPE_FORKED_WORKERS=0, runs Beam's own worker processes instead, says so in one line,
and a prepare -> vocab -> encode chain writes the same bytes either way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmtpipe.pipelines.beam import internals
from tests.helpers import MULTI_PROCESS, example_lines, write_pair

NOTE = "nmtpipe: local Beam workers start as Beam starts them, not forked"


def test_this_beam_has_the_internals_the_runtime_relies_on():
    assert internals._first_failure() is None


def test_a_changed_internal_is_named(monkeypatch):
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    monkeypatch.delattr(worker_handlers.ControlConnection, "abort")
    failure = internals._first_failure()
    assert failure is not None and failure.endswith("changed ControlConnection.abort")


def _nmtpipe(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "nmtpipe", *args], env=env, text=True,
                          capture_output=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _chain(folder: Path, forked: bool) -> tuple[dict[str, bytes], str]:
    """prepare, vocab, encode in `folder` (whose inputs and outputs manifests name):
    every file's bytes (the manifests' but for their time stamps), and what prepare and
    encode said; the outputs are removed again."""
    env = {**os.environ, internals.FORCE_OFF: "1" if forked else "0"}
    outputs = [folder / "prepared", folder / "vocab", folder / "encoded"]
    prepared, vocab, encoded = map(str, outputs)
    said = _nmtpipe(["prepare", "-s", "en", "-t", "zh", "--trainpref", str(folder / "train"),
                     "--num-shards", "2", "--output", prepared, *MULTI_PROCESS], env)  # fmt: skip
    _nmtpipe(["vocab", "--prepared", prepared, "--model", "t2t", "--vocab-size", "600",
              "--joined", "--output", vocab], env)  # fmt: skip
    said_too = _nmtpipe(["encode", "--prepared", prepared, "--vocab", vocab,
                         "--output", encoded, *MULTI_PROCESS], env)  # fmt: skip
    files = {}
    for output in outputs:
        for path in sorted(output.rglob("*")):
            if path.is_file() and ".nmtpipe" not in path.parts:
                data = path.read_bytes()
                if path.name == "manifest.json":
                    doc = json.loads(data)
                    data = json.dumps({k: v for k, v in doc.items() if k != "created"}).encode()
                files[str(path.relative_to(folder))] = data
        shutil.rmtree(output)
    return files, said.stderr + said_too.stderr


@pytest.mark.slow
def test_beams_own_workers_write_the_same_bytes_as_forked_ones(tmp_path):
    write_pair(tmp_path / "train", example_lines("tatoeba-cmn", "en")[::8],
               example_lines("tatoeba-cmn", "zh")[::8])  # fmt: skip
    forked, said = _chain(tmp_path, forked=True)
    beams, said_beams = _chain(tmp_path, forked=False)
    assert NOTE not in said
    assert said_beams.count(NOTE) == 2  # one line, once per command
    # (in a log, after the time it was written)
    assert [
        line
        for line in said_beams.splitlines()
        if line.endswith(NOTE + " (NMTPIPE_FORKED_WORKERS=0)")
    ]
    assert len(forked) > 10 and forked.keys() == beams.keys()
    assert [name for name in forked if forked[name] != beams[name]] == []
