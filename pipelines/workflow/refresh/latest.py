"""Training and decoding on a refresh's latest version (`nmtpipe refresh --train
--decode`): stages of steps for the runner, run after the root's lock is released
(training takes long, and a version is immutable).

The model of a vocabulary lives in `models/{vocab}/` and continues on each new version:
its training goes on over changing data (`reset_data`) and adds `train_updates` updates
per version; a version it has trained on is its committed result, reused. Each
version's test split is translated with it into `translations/NNNNNN/`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from nmtpipe.pipelines.workflow.decode import DecodeStep
from nmtpipe.pipelines.workflow.run_config import RunConfig
from nmtpipe.pipelines.workflow.steps.runner import Plan, Stage
from nmtpipe.pipelines.workflow.train import KIND as TRAINED
from nmtpipe.pipelines.workflow.train import TrainStep, committed_data
from nmtpipe.transforms.errors import ConfigError, OutputError
from nmtpipe.transforms.storage import fsio, manifest, versions


@dataclass(frozen=True)
class Latest:
    """The latest version (URL and number) and where its vocabulary's model trains."""

    data: str
    number: int
    save_dir: str


def latest(config: RunConfig) -> Latest:
    root = fsio.canonical_url(config.root)
    number = versions.latest_number(root)
    if number is None:
        raise ConfigError(f"nothing has been published under {root}; run nmtpipe refresh first")
    vocab = versions.read_version(root, number)["vocab"]["path"].rsplit("/", 1)[-1]
    return Latest(versions.version_url(root, number), number, fsio.join(root, "models", vocab))


def _no_old_record(at: Latest) -> None:
    """Refuse a model folder that an unreleased nmtpipe, before training had manifests,
    left with its record (`version.json`): it is not read."""
    record = fsio.join(at.save_dir, "version.json")
    if fsio.exists(record):
        raise OutputError(
            f"{record} is a record of an unreleased nmtpipe, which this one does not read: "
            f"delete it; the next --train then trains on from the checkpoints in {at.save_dir}"
        )


def _train(config: RunConfig) -> list[Plan]:
    """The vocabulary's model continued on the latest version (fairseq's reset of the
    data: each version is new data for the same model)."""
    at = latest(config)
    _no_old_record(at)
    job = dataclasses.replace(config.train, data=at.data, save_dir=at.save_dir, reset_data=True)
    nproc, more = config.nproc.get("train", 1), config.refresh.train_updates or None
    return [lambda: TrainStep(job, nproc, more)]


def _decode(config: RunConfig) -> list[Plan]:
    """The latest version's test split translated with the model trained on it."""
    at = latest(config)
    _no_old_record(at)
    trained = manifest.read_manifest(at.save_dir, TRAINED)
    version = committed_data(at.data)[1]["fingerprint"]
    if trained is None or trained["data"]["fingerprint"] != version:
        raise ConfigError(f"no model has trained on version {at.number:06d} yet; use --train")
    out = fsio.join(fsio.canonical_url(config.root), "translations", f"{at.number:06d}")
    job = dataclasses.replace(config.decode, data=at.data, output=out)
    nproc = config.nproc.get("decode", 1)
    return [lambda: DecodeStep(job, at.save_dir, nproc)]


TRAIN = Stage("train", _train)
DECODE = Stage("decode", _decode)
