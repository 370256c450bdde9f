"""Checkpoints on any fsspec URL: written atomically, loaded with `weights_only=True`.

A checkpoint holds what resuming needs to continue exactly: model, optimiser, the
update count, the data iterator's position (epoch, batches done), the RNG states, the
model and training config and the vocabulary's fingerprint. It is serialised in memory
and written atomically: a save killed half-way leaves the previous file untouched.
Names follow fairseq (`trainers/runtime/run_files.py`).
"""

from __future__ import annotations

import hashlib
import io
import pickle
import random
import re
from typing import Any

import torch

from nmtpipe.trainers.model.build import Seq2Seq, build_model
from nmtpipe.trainers.model.config import ModelConfig
from nmtpipe.trainers.model.packed_linear import pack_linears
from nmtpipe.trainers.runtime import run_files
from nmtpipe.trainers.runtime.run_files import NUMBERED
from nmtpipe.transforms.errors import ConfigError, InputError, IntegrityError
from nmtpipe.transforms.storage import fsio


def rng_state() -> dict[str, Any]:
    """The random generators training draws from (dropout; batches use their own seeded
    generator). Plain types and tensors only, so `weights_only` loading accepts them."""
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# A checkpoint is the zip file `torch.save` writes, with the sha256 of those bytes as the
# zip's archive comment: one file, still loaded by a plain `torch.load`, and checked on
# every load. The comment is the last field of the zip's end record (EOCD: 22 bytes
# ending in the comment's length), so it is added and removed without parsing the zip.
_EOCD = b"PK\x05\x06"
_EOCD_SIZE = 22
_DIGEST_TAG = b"nmtpipe-sha256:"
_COMMENT_SIZE = len(_DIGEST_TAG) + 64
_ZIP = b"PK\x03\x04"  # how a zip archive, and so a file of torch.save, begins
_LONGEST_COMMENT = 0xFFFF  # where an end record can be: this far before the end, at most
# What a user is told to give instead of a file that is not a checkpoint of nmtpipe's.
_GIVE = (
    "give one nmtpipe train wrote (a --save-dir's checkpoint_best.pt, checkpoint_last.pt "
    "or a numbered one)"
)


def with_digest(data: bytes) -> bytes:
    """`torch.save`'s bytes with their sha256 as the zip comment."""
    if data[-_EOCD_SIZE : -_EOCD_SIZE + 4] != _EOCD or data[-2:] != b"\0\0":
        raise ValueError("torch.save wrote no zip end record without a comment")
    comment = _DIGEST_TAG + hashlib.sha256(data).hexdigest().encode()
    return data[:-2] + len(comment).to_bytes(2, "little") + comment


def check(url: str, data: bytes) -> None:
    """Check `torch.save`'s bytes against the digest they carry (checkpoints without
    one, from older versions, are left to torch). The comment stays: torch reads past it.
    A file that is no zip archive is not a checkpoint; one whose archive has no end is
    truncated."""
    end = len(data) - _COMMENT_SIZE - _EOCD_SIZE
    record, comment = data[end : end + _EOCD_SIZE], data[end + _EOCD_SIZE :]
    ours = record[:4] == _EOCD and comment.startswith(_DIGEST_TAG)
    if not ours:
        if not data.startswith(_ZIP):
            raise InputError(
                f"{url} is not an nmtpipe checkpoint: it is {_format_of(data)}, not the zip "
                f"archive torch.save writes; {_GIVE}"
            )
        if data[-_EOCD_SIZE : -_EOCD_SIZE + 4] == _EOCD and data[-2:] == b"\0\0":
            return  # no comment: an older nmtpipe's checkpoint
        if _ends_early(data):
            raise IntegrityError(
                f"{url} is truncated: its {len(data):,} bytes end before its zip archive "
                "does; use another checkpoint (checkpoint_best.pt, a numbered one) or train "
                "again"
            )
    expected = comment.removeprefix(_DIGEST_TAG).decode("ascii", "replace")
    digest = hashlib.sha256(memoryview(data)[: end + _EOCD_SIZE - 2])  # no copy of the file
    digest.update(b"\0\0")  # the comment's length as torch.save wrote it: none
    actual = digest.hexdigest()
    if not ours or actual != expected:
        raise IntegrityError(
            f"{url} is corrupted: its sha256 is {actual}, the digest it was saved with is "
            f"{expected if ours else 'unreadable'}; use another checkpoint "
            "(checkpoint_best.pt, a numbered one) or train again"
        )


def _ends_early(data: bytes) -> bool:
    """Whether a zip archive's bytes stop before its end record and comment do (a file
    cut short: copied or written in part)."""
    at = data.rfind(_EOCD, max(len(data) - _EOCD_SIZE - _LONGEST_COMMENT, 0))
    if at < 0:
        return True
    length = int.from_bytes(data[at + _EOCD_SIZE - 2 : at + _EOCD_SIZE], "little")
    return at + _EOCD_SIZE + length > len(data)


def save(url: str, state: dict[str, Any]) -> None:
    """Write `state` to `url` atomically (readers see the old file or the new one)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    fsio.write_bytes(url, with_digest(buffer.getvalue()))


def _format_of(data: bytes) -> str:
    """What a file that is not a zip archive is, by its first bytes."""
    if not data:
        return "empty"
    if data[:1] == b"\x80":  # a pickle's protocol opcode (torch's legacy format is one)
        return "a plain pickle"
    return f"a file of another format (it begins {data[:8]!r})"


def sha256(url: str) -> str:
    """The sha256 of the checkpoint file at `url`, which identifies it in fingerprints."""
    try:
        return fsio.sha256_of(url)
    except FileNotFoundError:
        raise InputError(f"no checkpoint at {url}") from None
    except IsADirectoryError:
        raise ConfigError(run_files.folder_given(url)) from None


def load(url: str) -> dict[str, Any]:
    """A checkpoint, checked against its digest and loaded without running any pickled
    code (`weights_only=True`), then checked to hold what nmtpipe's checkpoints hold."""
    try:
        data = fsio.read_bytes(url)
    except FileNotFoundError:
        raise InputError(f"no checkpoint at {url}") from None
    except IsADirectoryError:
        raise ConfigError(run_files.folder_given(url)) from None
    check(url, data)
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:
        raise InputError(_why_not_loaded(url, e)) from e
    if not isinstance(state, dict) or not state.keys() >= _OURS:
        held = (
            f"keys {', '.join(sorted(map(str, state))[:5])}{', ...' * (len(state) > 5)}"
            if isinstance(state, dict)
            else f"a {type(state).__name__}"
        )
        raise InputError(
            f"{url} is not an nmtpipe checkpoint: a torch file holding {held}, without the "
            f"model and model_config an nmtpipe checkpoint holds; {_GIVE}"
        )
    return state


_OURS = {"model", "model_config"}  # what every checkpoint of nmtpipe's holds


# How torch's message begins when `weights_only` refuses an object, and where it names it.
_REFUSED = "Weights only load failed."
_REFUSED_GLOBAL = re.compile(r"GLOBAL (\S+)")


def _why_not_loaded(url: str, error: Exception) -> str:
    """Why `torch.load` failed, in one line. A refusal of `weights_only` loading says what
    the file holds and what to do, in place of torch's colours and its advice to load the
    file unsafely, which nmtpipe does not offer."""
    text = str(error).strip()
    if isinstance(error, pickle.UnpicklingError) and text.startswith(_REFUSED):
        named = _REFUSED_GLOBAL.search(text)
        return (
            f"{url} holds Python objects beyond tensors and plain values"
            f"{f' ({named.group(1)})' if named else ''}, which nmtpipe does not load: "
            "unpickling them could run any code. nmtpipe's own checkpoints hold none, so "
            "this one was not written by nmtpipe: use one that was (a --save-dir's "
            "checkpoint_best.pt, checkpoint_last.pt or a numbered one)"
        )
    reason = text.splitlines()[0] if text else type(error).__name__
    return f"{url} is not a readable nmtpipe checkpoint: {reason}"


def model_from(state: dict[str, Any]) -> Seq2Seq:
    """The model a checkpoint holds, rebuilt from its config and weights, in eval mode."""
    model = build_model(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.eval()


def inference_model(state: dict[str, Any], device: torch.device) -> Seq2Seq:
    """The checkpoint's model on `device`, ready to decode: on the CPU, with its linear
    layers packed for oneDNN (`packed_linear.py`); nothing trains it afterwards."""
    model = model_from(state).to(device)
    pack_linears(model)
    return model


def check_compatible(state: dict[str, Any], url: str, model: dict, vocab_fingerprint: str) -> None:
    """Refuse to resume from a checkpoint of another vocabulary or model shape."""
    if state.get("vocab_fingerprint") != vocab_fingerprint:
        raise InputError(
            f"{url} was trained with another vocabulary (fingerprint "
            f"{str(state.get('vocab_fingerprint'))[:12]}, the data's is {vocab_fingerprint[:12]})"
        )
    saved = ModelConfig(**state["model_config"]).as_dict() if "model_config" in state else {}
    differ = sorted(k for k in model.keys() | saved.keys() if model.get(k) != saved.get(k))
    if differ:
        shown = ", ".join(f"{k} {saved.get(k)} → {model.get(k)}" for k in differ)
        raise InputError(f"{url} is a model of another shape ({shown}); use another --save-dir")


def check_match(state: dict[str, Any], url: str, doc: dict[str, Any], data_url: str,
                fmt: str) -> None:  # fmt: skip
    """The checkpoint at `url` must have the vocabulary and shape of the data's vocabulary."""
    ours, theirs = state.get("vocab_fingerprint"), doc["vocab"]["fingerprint"]
    if ours != theirs:
        raise InputError(
            f"{url} was trained with another vocabulary (fingerprint "
            f"{str(ours)[:12]}) than {data_url} was encoded with ({theirs[:12]})"
        )
    sizes, model, langs = doc["vocab_sizes"][fmt], state["model_config"], doc["languages"]
    if (model["src_vocab"], model["tgt_vocab"]) != (sizes[langs["src"]], sizes[langs["tgt"]]):
        raise InputError(
            f"{url} has {model['src_vocab']}/{model['tgt_vocab']} embeddings, the {fmt} ids "
            f"of {data_url} need {sizes[langs['src']]}/{sizes[langs['tgt']]}; pass the "
            "--format it was trained on"
        )


def numbered_checkpoints(save_dir: str) -> list[str]:
    """The numbered checkpoints (`checkpoint{epoch}_{update}.pt`) in `save_dir`, oldest
    (by update) first."""
    found = []
    for url in fsio.find(save_dir):
        match = NUMBERED.match(url.rsplit("/", 1)[-1])
        if match:
            found.append((int(match.group(2)), url))
    return [url for _, url in sorted(found)]


def prune(save_dir: str, keep_last: int) -> None:
    """Delete all but the `keep_last` newest numbered checkpoints."""
    found = numbered_checkpoints(save_dir)
    for url in found[: max(len(found) - keep_last, 0)]:
        fsio.remove(url)
