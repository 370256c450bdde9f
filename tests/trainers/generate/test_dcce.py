"""`nmtpipe score`: a prepared dataset's train pairs scored by dual conditional
cross-entropy (the formula: tests/transforms/quality/models/test_dcce.py), one rank or two
alike, a killed run gone on with, the wrong model refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from nmtpipe.pipelines.cli.main import main
from nmtpipe.trainers.generate import dcce as job
from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.trainers.runtime.run_files import SCORE_SUMMARY
from nmtpipe.transforms.quality.models.dcce import dcce
from tests.helpers import prepare_example

NMTPIPE = [sys.executable, "-m", "nmtpipe"]


@pytest.fixture(scope="module")
def scored(tiny_model, tiny_backward_model, tmp_path_factory) -> dict[str, str]:
    """Three train shards of other example pairs, and the two models."""
    folder = tmp_path_factory.mktemp("to-score")
    prepared = prepare_example(folder, 100, num_shards=3, test_fraction=0.0, valid_fraction=0.0)
    return {
        "prepared": prepared,
        "forward": tiny_model["save_dir"],
        "backward": tiny_backward_model["checkpoint"],
    }


def score(scored: dict[str, str], output: Path, *more: str) -> list[str]:
    return ["score", "--prepared", scored["prepared"], "--forward", scored["forward"],
            "--backward", scored["backward"], "--output", str(output), *more]  # fmt: skip


def files(output: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(output.glob("train-*.parquet"))}


def test_one_rank_and_two_score_alike_and_as_the_model_does(scored, tmp_path, capsys):
    assert main(score(scored, tmp_path / "one", "--max-tokens", "256")) == 0
    two = subprocess.run(
        [*NMTPIPE, *score(scored, tmp_path / "two", "--max-tokens", "256", "--nproc", "2")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert two.returncode == 0, two.stderr[-3000:]
    one = files(tmp_path / "one")
    assert len(one) == 3 and one == files(tmp_path / "two")
    summary = json.loads((tmp_path / "two" / SCORE_SUMMARY).read_text())
    assert summary["world"] == 2 and summary["scored"] == summary["pairs"] > 100
    assert summary["forward"]["url"].endswith("checkpoint_best.pt")  # its --save-dir's best
    # Row for row with the shards, the formula applied to the cross-entropies.
    shard = pq.read_table(Path(scored["prepared"]) / "train-00001-of-00003.parquet")
    table = pq.read_table(tmp_path / "one" / "train-00001-of-00003.parquet")
    assert table["id"].to_pylist() == shard["id"].to_pylist()
    h_fwd, h_bwd = table["h_fwd"].to_numpy(), table["h_bwd"].to_numpy()
    assert np.allclose(table["dcce"].to_numpy(), dcce(h_fwd, h_bwd), rtol=1e-5)
    assert (h_fwd > 0).all() and (h_bwd > 0).all()
    # A pair's H_fwd is the model's mean NLL of its target tokens, scored alone.
    forward = job.Direction(summary["forward"]["url"], "--forward", ("en", "zh"), job.Ranks())
    src, tgt = shard["src"][0].as_py(), shard["tgt"][0].as_py()
    (s,), (t,) = forward.codec.encode("en", [src]), forward.codec.encode("zh", [tgt])
    model = checkpoint.model_from(checkpoint.load(summary["forward"]["url"]))
    with torch.no_grad():
        prev = torch.from_numpy(np.concatenate([[forward.layout.eos], t[:-1]]))[None]
        logits = model(torch.from_numpy(s)[None], prev)[0]
        alone = torch.nn.functional.cross_entropy(logits, torch.from_numpy(t)).item()
    assert h_fwd[0] == pytest.approx(alone, rel=1e-4)


def test_a_killed_run_goes_on_with_the_shards_not_scored(scored, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real, calls = job.Scorer.score_shard, []

    def dies_on_second(self, shard):
        calls.append(shard.path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, shard)

    monkeypatch.setattr(job.Scorer, "score_shard", dies_on_second)
    assert main(score(scored, out)) == 130
    assert list(files(out)) == ["train-00000-of-00003.parquet"]
    assert not (out / SCORE_SUMMARY).exists()
    first = files(out)["train-00000-of-00003.parquet"]
    monkeypatch.setattr(job.Scorer, "score_shard", real)
    assert main(score(scored, out)) == 0
    summary = json.loads((out / SCORE_SUMMARY).read_text())
    assert summary["shards_reused"] == 1 and summary["scored"] < summary["pairs"]
    assert files(out)["train-00000-of-00003.parquet"] == first
    assert files(out) == files(_fresh(scored, tmp_path / "fresh"))


def _fresh(scored: dict[str, str], output: Path) -> Path:
    assert main(score(scored, output)) == 0
    return output


def test_a_model_of_the_wrong_direction_is_refused(scored, tiny_model, tmp_path, capsys):
    wrong = {**scored, "backward": tiny_model["checkpoint"]}
    assert main(score(wrong, tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert "--backward" in err and "translates en→zh" in err and "zh→en" in err
    assert not (tmp_path / "out").exists()
