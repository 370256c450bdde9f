"""Decoding as a step: a test set translated and scored with a committed model's
checkpoint (`nmtpipe run`'s decode and its `evaluate:` sets, refresh's translations of
each version).

The fingerprint covers the checkpoint (its sha256, from the training's manifest: a model
trained further is another checkpoint, a commit that trained nothing is the same), the
data or the raw files translated (their identities), and the decoding options. The job
writes `hypotheses.txt`, `nbest.jsonl` and `scores.json` (its summary); the manifest
commits them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from nmtpipe import __version__
from nmtpipe.pipelines.workflow.steps.protocol import Evaluation
from nmtpipe.pipelines.workflow.steps.torch_steps import TorchStep
from nmtpipe.pipelines.workflow.train import committed_data, trained_checkpoint
from nmtpipe.trainers.generate.decode_config import DecodeConfig
from nmtpipe.trainers.runtime.run_files import HYPOTHESES, NBEST, SCORES
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import StepOutcome

KIND = "nmtpipe.decode"
# The job's paths: its inputs are fingerprinted by what they hold, its output is where
# the step is.
_PATHS = ("checkpoint", "output", "data", "inputs", "references")
_OURS = re.compile(r"^(hypotheses\.txt|nbest\.jsonl|scores\.json)$")


class DecodeStep(TorchStep):
    """The decoding `config` asks for, with the checkpoint that the committed training
    at `model` chose, on `nproc` processes; `name`: the test set's (default: the split's)."""

    kind = KIND
    ours = _OURS
    command = "decode"

    def __init__(
        self,
        config: DecodeConfig,
        model: str,
        nproc: int = 1,
        name: str | None = None,
    ) -> None:
        self.checkpoint = trained_checkpoint(model)
        self.job = dataclasses.replace(config, checkpoint=self.checkpoint["url"])
        self.output = fsio.canonical_url(config.output)
        self.nproc, self.name = nproc, name or config.split
        self.data = None if config.data is None else committed_data(config.data)[1]
        self.inputs = [fsio.file_identity(url) for url in (*config.inputs, *config.references)]
        self.options = {k: v for k, v in dataclasses.asdict(config).items() if k not in _PATHS}
        self.fingerprint = manifest.fingerprint(
            {"step": KIND, "code_version": __version__, "checkpoint": self.checkpoint["sha256"],
             "data": self.data and self.data["fingerprint"], "inputs": self.inputs,
             "options": self.options}
        )  # fmt: skip

    def announce(self, runner: str) -> str:
        return f"translating {self.name} into {self.output} ({runner})"

    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        return {
            "name": self.name,
            "checkpoint": self.checkpoint,
            "data": self.data,
            "inputs": self.inputs,
            "options": self.options,
            "stats": SCORES,
            "files": sorted(files, key=lambda f: f["path"]),
        }

    def figures(self, outcome: StepOutcome) -> str:
        scores = outcome.stats
        found = [f"{metric} {scores[metric]}" for metric in ("bleu", "chrf") if metric in scores]
        return ", ".join([f"{self.name} {scores['sentences']:,} sentences", *found])

    def evaluation(self, outcome: StepOutcome) -> Evaluation:
        return Evaluation(self.name, outcome.stats, self.output)

    def places(self, outcome: StepOutcome) -> dict[str, str]:
        return {f"translations ({self.name})": fsio.join(self.output, HYPOTHESES)}


def examples(evaluation: Evaluation, count: int = 5) -> list[dict[str, Any]]:
    """`count` translations of a test set, spread evenly over it (its n-best records:
    source, reference, hypotheses)."""
    total = evaluation.scores["sentences"]
    wanted = {i * total // count for i in range(count)} if total else set()
    fs, path = fsio.url_to_fs(fsio.join(evaluation.output, NBEST))
    found = []
    with fs.open(path, "rb") as f:
        for number, line in enumerate(f):
            if number in wanted:
                found.append(json.loads(line))
    return found
