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
from nmtpipe.trainers.runtime.run_files import NBEST, SCORES, SUMMARY
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
    parts = []
    for name, scores in evaluations(config):
        found = [f"{metric} {scores[metric]}" for metric in ("bleu", "chrf") if metric in scores]
        parts.append(", ".join([f"{name} {scores['sentences']:,} sentences", *found]))
    return "; ".join(parts)


def evaluations(config: RunConfig) -> list[tuple[str, dict[str, Any]]]:
    """The decode step's scores: the test split's, then each extra set's, by name."""
    sets = [(config.decode.split, config.decoded())]
    sets += [(s.name, config.decoded(s.name)) for s in config.evaluate]
    return [(name, json.loads(fsio.read_bytes(fsio.join(url, SCORES)))) for name, url in sets]


def examples(config: RunConfig, count: int = 5) -> list[dict[str, Any]]:
    """`count` translations of the test split, spread evenly over it (the decode step's
    n-best records: source, reference, hypotheses)."""
    total = json.loads(fsio.read_bytes(fsio.join(config.decoded(), SCORES)))["sentences"]
    wanted = {i * total // count for i in range(count)} if total else set()
    fs, path = fsio.url_to_fs(fsio.join(config.decoded(), NBEST))
    found = []
    with fs.open(path, "rb") as f:
        for number, line in enumerate(f):
            if number in wanted:
                found.append(json.loads(line))
    return found
