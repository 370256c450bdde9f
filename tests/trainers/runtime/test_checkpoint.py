"""Checkpoints carry the sha256 of their bytes and are refused when those change."""

from __future__ import annotations

import io

import pytest
import torch

from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.transforms.errors import InputError, IntegrityError
from tests.helpers import write_foreign_checkpoint


def _saved(tmp_path) -> tuple[str, dict]:
    url = str(tmp_path / "checkpoint_last.pt")
    state = {"model": {"w": torch.arange(4096, dtype=torch.float32)}, "position": {"update": 3}}
    checkpoint.save(url, state)
    return url, state


def test_a_checkpoint_round_trips_and_plain_torch_still_loads_it(tmp_path):
    url, state = _saved(tmp_path)
    assert torch.equal(checkpoint.load(url)["model"]["w"], state["model"]["w"])
    plain = torch.load(url, weights_only=True)  # the digest is a zip comment torch ignores
    assert torch.equal(plain["model"]["w"], state["model"]["w"])


@pytest.mark.parametrize("where", [0.0, 0.01, 0.3, 0.6, 0.9, 0.999])
def test_a_flipped_byte_anywhere_is_refused(tmp_path, where):
    url, _ = _saved(tmp_path)
    path = tmp_path / "checkpoint_last.pt"
    data = bytearray(path.read_bytes())
    data[min(int(len(data) * where), len(data) - 1)] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"checkpoint_last\.pt is corrupted: its sha256 is"):
        checkpoint.load(url)


def test_a_checkpoint_without_a_digest_loads_as_before(tmp_path):
    buffer = io.BytesIO()
    torch.save({"x": torch.ones(3)}, buffer)
    (tmp_path / "old.pt").write_bytes(buffer.getvalue())
    assert torch.equal(checkpoint.load(str(tmp_path / "old.pt"))["x"], torch.ones(3))


def test_a_checkpoint_holding_other_objects_is_refused_in_nmtpipe_words(tmp_path):
    named = write_foreign_checkpoint(tmp_path / "foreign.pt")
    url = str(tmp_path / "foreign.pt")
    with pytest.raises(InputError) as refused:
        checkpoint.load(url)
    assert str(refused.value) == (
        f"{url} holds Python objects beyond tensors and plain values ({named}), which "
        "nmtpipe does not load: unpickling them could run any code. nmtpipe's own "
        "checkpoints hold none, so this one was not written by nmtpipe: use one that was "
        "(a --save-dir's checkpoint_best.pt, checkpoint_last.pt or a numbered one)"
    )
