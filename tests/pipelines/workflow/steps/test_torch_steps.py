"""A torch job as a step: a toy step added with one module and one registration line is
run by `nmtpipe run` under torchrun, committed by the driver after its job, reused, run
again when its input changes, and goes on from what a failed job left."""

from __future__ import annotations

import hashlib
import json
import os
import re

import pytest

from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.workflow import run
from nmtpipe.pipelines.workflow.steps.torch_steps import TorchStep
from nmtpipe.transforms.storage import fsio, manifest
from tests.helpers import command_result
from tests.pipelines.workflow.steps import toy_step
from tests.pipelines.workflow.test_run import config, table


@pytest.fixture
def toy(monkeypatch):
    """The toy step registered after prepare, for one test (the chain is put back)."""
    monkeypatch.setattr(run, "CHAIN", run.CHAIN)
    monkeypatch.setattr(toy_step, "FAIL_AFTER", [0])
    run.register(toy_step.STAGE, after="prepare")  # the one registration line
    return toy_step


def train_pairs(tmp_path) -> int:
    doc = json.loads((tmp_path / "root" / "prepared" / "manifest.json").read_text())
    return doc["splits"]["train"]["pairs"]


def _row(stdout: str, name: str) -> dict:
    (row,) = [s for s in command_result(stdout)["steps"] if s["step"] == name]
    return row


def test_a_registered_torch_step_runs_is_cached_and_reruns_when_its_input_changes(
    tmp_path, capsys, toy
):
    path = config(tmp_path, prepare__num_shards=2)
    assert main(["run", str(path), "--until", "lengths"]) == 0
    out = capsys.readouterr().out
    assert table(out) == {"prepare": "ran", "lengths": "ran", "vocab": "skipped",
                          "encode": "skipped", "train": "skipped", "decode": "skipped"}  # fmt: skip
    assert list(table(out)) == ["prepare", "lengths", "vocab", "encode", "train", "decode"]
    lengths = tmp_path / "root" / "lengths"
    doc = manifest.read_manifest(str(lengths), "nmtpipe.test.lengths")
    summary = json.loads((lengths / "lengths.json").read_text())
    # Two ranks under torchrun did the work; the driver committed it once they had ended.
    assert [f["path"].split("-")[:2] for f in doc["files"]] == [["lengths.json"], ["part", "0"],
                                                                ["part", "1"]]  # fmt: skip
    assert summary["pairs"] == train_pairs(tmp_path) and summary["resumed_shards"] == 0
    row = _row(out, "lengths")
    assert row["figures"] == f"{summary['pairs']:,} pairs in 4 bins"
    assert row["results"][0]["runner"] == "torchrun, 2 processes"
    # Run again: found in its output's manifest.
    assert main(["run", str(path), "--until", "lengths"]) == 0
    out = capsys.readouterr().out
    assert table(out)["lengths"] == "cached" and table(out)["prepare"] == "cached"
    assert _row(out, "lengths")["figures"] == row["figures"]
    # Its input changes: prepare runs again, and so does the toy, its last commit gone
    # before its job starts.
    path = config(tmp_path, prepare__num_shards=2, prepare__valid_fraction=0.1)
    assert main(["run", str(path), "--until", "lengths"]) == 0
    out = capsys.readouterr().out
    assert table(out)["prepare"] == "ran" and table(out)["lengths"] == "ran"
    again = manifest.read_manifest(str(lengths), "nmtpipe.test.lengths")
    assert again["fingerprint"] != doc["fingerprint"]
    summary = json.loads((lengths / "lengths.json").read_text())
    assert not summary["committed_while_running"] and summary["pairs"] == train_pairs(tmp_path)
    assert len(again["files"]) == 3


def test_a_failed_job_commits_nothing_and_its_rerun_goes_on_from_what_it_left(
    tmp_path, capsys, toy
):
    path = config(tmp_path, prepare__num_shards=2)
    toy.FAIL_AFTER[0] = 1
    assert main(["run", str(path), "--until", "lengths"]) == 1
    lengths = tmp_path / "root" / "lengths"
    err = capsys.readouterr().err
    assert "rank 0 of 2 failed: internal error: RuntimeError: the toy job was told to fail" in err
    assert not (lengths / "manifest.json").exists()
    assert [p.name.split("-")[:2] for p in lengths.iterdir()] == [["part", "0"]]
    toy.FAIL_AFTER[0] = 0
    assert main(["run", str(path), "--until", "lengths"]) == 0
    out = capsys.readouterr().out
    assert table(out)["lengths"] == "ran"
    summary = json.loads((lengths / "lengths.json").read_text())
    assert summary["resumed_shards"] == 1 and (lengths / "manifest.json").exists()


def test_the_chain_lists_a_stage_once(toy):
    with pytest.raises(ValueError, match="a stage 'lengths' is in the chain already"):
        run.register(toy.STAGE)
    assert run.stage_names()[:3] == ["prepare", "lengths", "vocab"]


class _Files(TorchStep):
    """Two files of a job, committed as a torch step commits them."""

    kind = "nmtpipe.test.files"
    ours = re.compile(r"^[ab]\.bin$")

    def __init__(self, output, known):
        self.output, self.known = str(output), known
        self.job = toy_step.LengthsJob("", str(output))

    def manifest(self, files, stats):
        return {"files": files}


def test_a_commit_reads_again_only_the_files_changed_since_the_last(tmp_path, monkeypatch):
    (tmp_path / "a.bin").write_bytes(b"a" * 100)
    (tmp_path / "b.bin").write_bytes(b"b" * 100)
    (tmp_path / "lengths.json").write_text("{}")
    first = {f["path"]: f for f in _Files(tmp_path, {}).write().files}
    assert first["a.bin"]["sha256"] == hashlib.sha256(b"a" * 100).hexdigest()
    (tmp_path / "b.bin").write_bytes(b"c" * 100)  # the same size, rewritten
    os.utime(tmp_path / "b.bin", ns=(1, 1))
    read = []
    monkeypatch.setattr(fsio, "sha256_of", lambda url, digest=fsio.sha256_of: read.append(url)
                        or digest(url))  # fmt: skip
    again = {f["path"]: f for f in _Files(tmp_path, first).write().files}
    assert read == [str(tmp_path / "b.bin")]
    assert again["a.bin"] == first["a.bin"]
    assert again["b.bin"]["sha256"] == hashlib.sha256(b"c" * 100).hexdigest()
