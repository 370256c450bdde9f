"""Checkpoint averaging: the weights are the mean; the newest checkpoints by update."""

from __future__ import annotations

import pytest
import torch

from nmtpipe.pipelines.cli.main import main
from nmtpipe.trainers.runtime import checkpoint, run_files
from nmtpipe.trainers.train.average import average, write_average
from nmtpipe.transforms.errors import InputError
from tests.helpers import command_result


def state(seed: int, **changes) -> dict:
    generator = torch.Generator().manual_seed(seed)
    model = {
        "weight": torch.randn(3, 4, generator=generator),
        "half": torch.randn(5, generator=generator).to(torch.bfloat16),
    }
    return {"model": model, "model_config": {"d_model": 4}, "vocab_fingerprint": "v",
            "train_config": {"arch": "x"}, "optimizer": {"big": 1}, **changes}  # fmt: skip


def test_the_averaged_weights_are_the_mean(tmp_path):
    urls = []
    for seed in range(3):
        urls.append(str(tmp_path / f"c{seed}.pt"))
        checkpoint.save(urls[-1], state(seed))
    averaged = average(urls)
    models = [state(seed)["model"] for seed in range(3)]
    expected = torch.stack([m["weight"] for m in models]).mean(dim=0)
    torch.testing.assert_close(averaged["model"]["weight"], expected)
    half = torch.stack([m["half"].double() for m in models]).mean(dim=0).to(torch.bfloat16)
    assert averaged["model"]["half"].dtype == torch.bfloat16
    torch.testing.assert_close(averaged["model"]["half"], half)
    assert "optimizer" not in averaged and averaged["averaged"] == ["c0.pt", "c1.pt", "c2.pt"]
    assert averaged["vocab_fingerprint"] == "v"


def test_checkpoints_of_another_vocabulary_are_refused(tmp_path):
    checkpoint.save(str(tmp_path / "a.pt"), state(0))
    checkpoint.save(str(tmp_path / "b.pt"), state(1, vocab_fingerprint="w"))
    with pytest.raises(InputError, match=r"b\.pt differs from .*a\.pt in its vocab_fingerprint"):
        average([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")])


def test_the_last_numbered_checkpoints_by_update_and_the_command(tmp_path, capsys):
    for epoch, update in ((1, 5), (1, 10), (2, 100), (2, 20)):
        checkpoint.save(str(tmp_path / run_files.numbered(epoch, update)), state(update))
    checkpoint.save(str(tmp_path / run_files.LAST), state(7))
    out, urls = write_average(str(tmp_path), 2)
    assert out == f"{tmp_path}/{run_files.AVERAGE}"
    assert [u.rsplit("/", 1)[-1] for u in urls] == ["checkpoint2_20.pt", "checkpoint2_100.pt"]
    assert main(["average", "--save-dir", str(tmp_path), "--last", "3", "--output",
                 str(tmp_path / "avg3.pt")]) == 0  # fmt: skip
    out, err = capsys.readouterr()
    assert "averaged 3 checkpoint(s)" in err
    assert command_result(out)["output"] == str(tmp_path / "avg3.pt")
    three = checkpoint.load(str(tmp_path / "avg3.pt"))
    assert three["averaged"] == ["checkpoint1_10.pt", "checkpoint2_20.pt", "checkpoint2_100.pt"]
    assert main(["average", "--save-dir", str(tmp_path / "none")]) == 1
    assert "has no numbered checkpoints" in capsys.readouterr().err
