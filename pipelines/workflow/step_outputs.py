"""What each step of `nmtpipe run` holds under the root, and the records of the torch steps.

prepare, vocab and encode are content-addressed by their own manifests. train and
decode are recorded here: `{root}/workflow/{step}.json` holds a fingerprint of the
step's options and its input, written once the step has finished, so a finished step
is skipped and a changed option (or a changed input upstream) runs it again.
"""

from __future__ import annotations

import json
from typing import Any

from nmtpipe.pipelines.workflow.run_config import WIRING, RunConfig
from nmtpipe.trainers.loop.run_files import SCORES, SUMMARY
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats import encoded_dataset, prepared
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.vocab import vocabulary

_KINDS = {"prepare": prepared.KIND, "vocab": vocabulary.KIND, "encode": encoded_dataset.KIND}


def committed(config: RunConfig, step: str) -> dict[str, Any] | None:
    """The manifest of a Beam step's output under the root, if committed."""
    url = fsio.canonical_url(config.url(WIRING[step]["output"]))
    return manifest.read_manifest(url, _KINDS[step])


def _record_url(config: RunConfig, step: str) -> str:
    return config.url(f"workflow/{step}.json")


def read_record(config: RunConfig, step: str) -> dict[str, Any] | None:
    url = _record_url(config, step)
    return json.loads(fsio.read_bytes(url)) if fsio.exists(url) else None


def write_record(config: RunConfig, step: str, fingerprint: str) -> None:
    fsio.write_bytes(_record_url(config, step), json.dumps({"fingerprint": fingerprint}).encode())


def remove_record(config: RunConfig, step: str) -> None:
    fsio.remove(_record_url(config, step))


def upstream_fingerprint(config: RunConfig, step: str) -> str:
    """What a torch step's result depends on besides its own options."""
    if step == "train":
        doc = committed(config, "encode")
        if doc is None:
            raise InputError(f"{config.url('encoded')} holds no encode output; run encode first")
        return doc["fingerprint"]
    record = read_record(config, "train")
    if record is None:
        raise InputError("train has not finished under this root; run it first")
    return record["fingerprint"]


def figures(config: RunConfig, step: str) -> str:
    """The key figures of a step's committed output, for the summary table."""
    if step in ("prepare", "vocab", "encode"):
        doc = committed(config, step)
        if doc is None:
            return ""
        if step == "vocab":
            sizes = {side: v.get("vocab_size") for side, v in doc["vocabularies"].items()}
            return f"{doc['model']} " + ", ".join(f"{s} {n:,}" for s, n in sizes.items() if n)
        return ", ".join(f"{split} {info['pairs']:,}" for split, info in doc["splits"].items())
    if step == "train":
        summary = json.loads(fsio.read_bytes(config.url(f"checkpoints/{SUMMARY}")))
        return f"{summary['updates']} updates, valid loss {summary['valid_loss']:.3f}"
    scores = json.loads(fsio.read_bytes(config.url(f"decoded/{SCORES}")))
    found = [f"{name} {scores[name]}" for name in ("bleu", "chrf") if name in scores]
    return ", ".join([f"{scores['sentences']:,} sentences", *found])
