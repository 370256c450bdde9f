"""Roots that an nmtpipe before manifests for training and decoding wrote: their records,
read once in place of the manifest, then removed.

- A `nmtpipe run` root kept `{root}/workflow/train.json` and `decode.json`: a fingerprint
  of the step's options and of its input, written when the step finished.
- A refresh root kept `models/{vocab}/version.json`, the last version the model trained
  on, and took a version's translations as done once their `scores.json` was written.

Where a record says that the output holds what the step would make now (the fingerprint
this config gives; the latest version; scores written), the step commits the output as
it is (`TorchStep.adopted`); otherwise its work runs (training continues from the
checkpoints it finds). Either way the record goes once the output is committed or its
work starts.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from nmtpipe.pipelines.workflow.run_config import WIRING, RunConfig
from nmtpipe.trainers.runtime.run_files import SCORES
from nmtpipe.transforms.formats import encoded_dataset
from nmtpipe.transforms.storage import fsio, manifest

RECORDS = "workflow"  # a run root's folder of records


class _RunRecord:
    """`{root}/workflow/{name}.json` of a run root: finished when it holds `expected`
    (computed when the step is planned, before any record of the run is removed)."""

    def __init__(self, config: RunConfig, name: str, expected: str | None) -> None:
        self.folder = config.url(RECORDS)
        self.url = fsio.join(self.folder, f"{name}.json")
        record = json.loads(fsio.read_bytes(self.url)) if fsio.exists(self.url) else None
        self.matches = record is not None and record.get("fingerprint") == expected

    def finished(self) -> bool:
        return self.matches

    def retire(self) -> None:
        fsio.remove(self.url)
        if not fsio.find(self.folder):
            fsio.remove_tree(self.folder)


def _options(config: RunConfig, name: str) -> dict[str, Any]:
    """The record's options: the step's typed options less the paths the workflow wires."""
    typed = dataclasses.asdict(getattr(config, name))
    return {k: v for k, v in typed.items() if k not in WIRING[name]}


def _train_fingerprint(config: RunConfig) -> str | None:
    """What the record of a finished training holds: its options and the fingerprint of
    the encode output it read."""
    doc = manifest.read_manifest(config.encode.output, encoded_dataset.KIND)
    if doc is None:
        return None
    options = _options(config, "train")
    return manifest.fingerprint({"step": "train", "options": options, "input": doc["fingerprint"]})


def run_train(config: RunConfig) -> _RunRecord:
    """A run root's record of its training."""
    return _RunRecord(config, "train", _train_fingerprint(config))


def run_decode(config: RunConfig) -> _RunRecord:
    """A run root's record of its decoding (the test split and every `evaluate:` set):
    its options and the extra sets, and the training's record as its input."""
    options = _options(config, "decode")
    options["evaluate"] = [dataclasses.asdict(s) for s in config.evaluate]
    expected = manifest.fingerprint(
        {"step": "decode", "options": options, "input": _train_fingerprint(config)}
    )
    return _RunRecord(config, "decode", expected)


class VersionRecord:
    """`models/{vocab}/version.json` of a refresh root: finished when the model has
    trained on version `number`."""

    def __init__(self, save_dir: str, number: int) -> None:
        self.url, self.number = fsio.join(save_dir, "version.json"), number

    def finished(self) -> bool:
        if not fsio.exists(self.url):
            return False
        return json.loads(fsio.read_bytes(self.url))["version"] >= self.number

    def retire(self) -> None:
        fsio.remove(self.url)


class ScoresRecord:
    """A version's translations in a refresh root: finished once `scores.json`, which
    decoding writes last, is there."""

    def __init__(self, output: str) -> None:
        self.url = fsio.join(output, SCORES)

    def finished(self) -> bool:
        return fsio.exists(self.url)

    def retire(self) -> None:
        """The record is the output's own file: it stays."""
