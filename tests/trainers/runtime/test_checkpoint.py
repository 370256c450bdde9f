"""Checkpoints carry the sha256 of their bytes and are refused when those change."""

from __future__ import annotations

import io
import pickle

import pytest
import torch

from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.transforms.errors import InputError, IntegrityError
from tests.helpers import write_foreign_checkpoint


def _saved(tmp_path) -> tuple[str, dict]:
    url = str(tmp_path / "checkpoint_last.pt")
    state = {"model": {"w": torch.arange(4096, dtype=torch.float32)}, "model_config": {},
             "position": {"update": 3}}  # fmt: skip
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
    torch.save({"model": {"x": torch.ones(3)}, "model_config": {}}, buffer)
    (tmp_path / "old.pt").write_bytes(buffer.getvalue())
    assert torch.equal(checkpoint.load(str(tmp_path / "old.pt"))["model"]["x"], torch.ones(3))


GIVE = (
    "give one nmtpipe train wrote (a --save-dir's checkpoint_best.pt, checkpoint_last.pt "
    "or a numbered one)"
)


def test_a_file_torch_cannot_read_at_all_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"model": {"w": [1.0, 2.0]}}))
    with pytest.raises(InputError) as refused:
        checkpoint.load(str(path))
    assert str(refused.value) == (
        f"{path} is not an nmtpipe checkpoint: it is a plain pickle, not the zip archive "
        f"torch.save writes; {GIVE}"
    )
    path.write_bytes(b"\x89HDF\r\n\x1a\n...")
    with pytest.raises(InputError, match=r"it is a file of another format \(it begins b'\\x89HDF"):
        checkpoint.load(str(path))


@pytest.mark.parametrize("cut", [1, 50, 4000])
def test_a_truncated_checkpoint_says_so(tmp_path, cut):
    url, _ = _saved(tmp_path)
    path = tmp_path / "checkpoint_last.pt"
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    with pytest.raises(IntegrityError) as refused:
        checkpoint.load(url)
    assert str(refused.value) == (
        f"{url} is truncated: its {len(data) - cut:,} bytes end before its zip archive does; "
        "use another checkpoint (checkpoint_best.pt, a numbered one) or train again"
    )


def test_a_torch_file_that_is_not_ours_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    torch.save({"encoder.weight": torch.ones(2), "decoder.weight": torch.ones(2)}, path)
    with pytest.raises(InputError) as refused:
        checkpoint.load(str(path))
    assert str(refused.value) == (
        f"{path} is not an nmtpipe checkpoint: a torch file holding keys decoder.weight, "
        f"encoder.weight, without the model and model_config an nmtpipe checkpoint holds; {GIVE}"
    )


def test_a_folder_given_as_a_checkpoint_lists_what_to_give(tmp_path):
    from nmtpipe.trainers.runtime import run_files
    from nmtpipe.transforms.errors import ConfigError

    for name in ("checkpoint_last.pt", "checkpoint1_50.pt", "checkpoint2_100.pt", "x.txt"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ConfigError) as refused:
        checkpoint.load(str(tmp_path))
    assert str(refused.value) == (
        f"{tmp_path} is a folder, not a checkpoint file; give a checkpoint in it: "
        "checkpoint_last.pt, checkpoint2_100.pt, checkpoint1_50.pt"
    )
    with pytest.raises(ConfigError, match=r"--checkpoint .* is a folder"):
        run_files.checkpoint_file(str(tmp_path))
    (tmp_path / "checkpoint_best.pt").write_bytes(b"")
    assert run_files.checkpoint_file(str(tmp_path)) == f"{tmp_path}/checkpoint_best.pt"
    assert run_files.checkpoint_file(f"{tmp_path}/x.txt") == f"{tmp_path}/x.txt"


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
