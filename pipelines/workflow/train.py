"""Training as a step: a model, named by what defines it, committed at each state of its
training (`nmtpipe run`'s train, refresh's model of a vocabulary).

The output's manifest names the **model** by what defines it: the options of its shape
(`TrainConfig.model_options`), its vocabulary and, unless its training goes on over
changing data (`reset_data`, as a refresh continues a model on each version), the data
it trains on. Its **fingerprint** names one state of that model's training: the model,
every other option and the data it last trained on. So a change of an option that only
steers or extends training (max_update, patience, the learning rate, ...), or with
`reset_data` of the data, makes a new commit of the same model: the job continues from
the last checkpoint in the output, exactly as `nmtpipe train` resumes. A change of what
defines the model is refused in one line: the output holds another model, and nmtpipe
never deletes one.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from nmtpipe.pipelines.workflow.steps.protocol import Written
from nmtpipe.pipelines.workflow.steps.torch_steps import TorchStep
from nmtpipe.trainers.runtime.run_files import AVERAGE, BEST, CURVES_SVG, LAST, SUMMARY
from nmtpipe.trainers.train.train_config import TrainConfig
from nmtpipe.transforms.errors import OutputError
from nmtpipe.transforms.formats.encoded_dataset import committed_doc, data_fingerprint
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import StepOutcome

KIND = "nmtpipe.train"
# The job's input and output: the input is fingerprinted by its manifest, the output is
# where the step is.
_PATHS = ("data", "save_dir")
_OURS = re.compile(
    r"^(checkpoint[^/]*\.pt|train_log\.jsonl|train_summary\.json|learning_curve\.(svg|json))$"
)
_PARTS = (("options", "architecture"), ("vocab", "vocabulary"), ("data", "data"))


def committed_data(url: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The manifest of the encode output or version at `url`, and the record of it a
    torch step keeps: its URL and the fingerprint of its data."""
    doc = committed_doc(url)
    return doc, {"url": fsio.canonical_url(url), "fingerprint": data_fingerprint(doc)}


def _other_model(out: str, theirs: dict[str, Any], ours: dict[str, Any]) -> OutputError:
    """The one line that refuses to train a model into an output that holds another."""
    differ = [name for key, name in _PARTS if theirs.get(key) != ours.get(key)]
    hint = ", or set reset_data to continue it on this data" if differ == ["data"] else ""
    return OutputError(
        f"{out} holds another model (other {' and '.join(differ)}: model "
        f"{theirs['fingerprint'][:12]}, this config's is {ours['fingerprint'][:12]}); "
        f"delete {out} to train this one there{hint}"
    )


def _target(last: dict[str, Any] | None, data: str, more: int) -> int:
    """The max_update of a job that trains `more` updates on each new data: `more` past
    the update the model's last job ended at, or on the data it last trained on, that
    job's own (nothing is left to train)."""
    if last is None:
        return more
    if last.get("data_fingerprint") == data:
        return last["max_update"]
    return last["updates"] + more


class TrainStep(TorchStep):
    """A training job into `config.save_dir`, on `nproc` processes; with `more_updates`,
    `max_update` is that many updates past where the model's last job ended on other
    data (a refresh's `train_updates` per version)."""

    kind = KIND
    ours = _OURS
    command = "train"

    def __init__(
        self,
        config: TrainConfig,
        nproc: int = 1,
        more_updates: int | None = None,
    ) -> None:
        self.output = fsio.canonical_url(config.save_dir)
        self.nproc = nproc
        doc, self.data = committed_data(config.data)
        model = {
            "options": config.model_options(doc["formats"][0]),
            "vocab": doc["vocab"]["fingerprint"],
            "data": None if config.reset_data else self.data["fingerprint"],
        }
        self.model = {"fingerprint": manifest.fingerprint(model), **model}
        committed = manifest.read_manifest(self.output, KIND)
        if committed is not None and committed["model"]["fingerprint"] != self.model["fingerprint"]:
            raise _other_model(self.output, committed["model"], self.model)
        self.known = {f["path"]: f for f in committed["files"]} if committed else {}
        self.options = {k: v for k, v in dataclasses.asdict(config).items() if k not in _PATHS}
        if more_updates is not None:
            del self.options["max_update"]
            self.options["more_updates"] = more_updates
            target = _target(self._last_summary(), self.data["fingerprint"], more_updates)
            config = dataclasses.replace(config, max_update=target)
        self.job = config
        self.fingerprint = manifest.fingerprint(
            {"step": KIND, "model": self.model["fingerprint"], "options": self.options,
             "data": self.data["fingerprint"]}
        )  # fmt: skip

    def _last_summary(self) -> dict[str, Any] | None:
        """What the last job that finished in the output ended with, if one did."""
        url = fsio.join(self.output, SUMMARY)
        return json.loads(fsio.read_bytes(url)) if fsio.exists(url) else None

    def continued(self, committed: dict[str, Any]) -> str:
        return (
            f"continuing the model in {self.output} from update {committed['updates']} "
            "(other options or data than its last commit)"
        )

    def announce(self, runner: str) -> str:
        return f"training in {self.output} on {self.data['url']} ({runner})"

    def write(self) -> Written:
        written = super().write()
        listed = {f["path"] for f in written.files}
        average = [AVERAGE] if self.job.average_last else []
        found = [name for name in [*average, BEST, LAST] if name in listed]
        if not found:
            raise OutputError(f"{self.output}: training left no checkpoint; nothing committed")
        self.checkpoint = found[0]
        return written

    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        assert stats is not None
        return {
            "model": self.model,
            "data": self.data,
            "options": self.options,
            "updates": stats["updates"],
            "checkpoint": self.checkpoint,  # what decoding translates with
            "stats": SUMMARY,
            "files": sorted(files, key=lambda f: f["path"]),
        }

    def figures(self, outcome: StepOutcome) -> str:
        summary = outcome.stats
        return f"{summary['updates']} updates, valid loss {summary['valid_loss']:.3f}"

    def places(self, outcome: StepOutcome) -> dict[str, str]:
        committed = outcome.manifest
        found = {"model": fsio.join(self.output, committed["checkpoint"])}
        if any(f["path"] == CURVES_SVG for f in committed["files"]):
            found["curves"] = fsio.join(self.output, CURVES_SVG)
        return found


def trained_checkpoint(url: str) -> dict[str, str]:
    """The checkpoint the committed training at `url` chose for decoding (the average of
    the last ones when it averages, else the best, else the last), by URL and sha256."""
    root, doc = manifest.open_committed(url, KIND, "train")
    entry = next(f for f in doc["files"] if f["path"] == doc["checkpoint"])
    return {"url": fsio.join(root, entry["path"]), "sha256": entry["sha256"]}
