"""Training and decoding on a refresh's latest version (`nmtpipe refresh --train
--decode`), after the root's lock is released: training takes long, and a version is
immutable. The model of a vocabulary lives in `models/{vocab}/` and continues on each
new version; each version's test split is translated into `translations/NNNNNN/`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass

from nmtpipe.pipelines.workflow.run import Show
from nmtpipe.pipelines.workflow.run_config import RunConfig
from nmtpipe.trainers.runtime.run_files import BEST, LAST, SCORES, SUMMARY
from nmtpipe.trainers.train.launch import Job, run_job
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage import fsio, versions


@dataclass(frozen=True)
class Latest:
    """The latest version (URL and number), where its vocabulary's model trains, and
    the last version that model trained on (0: none)."""

    data: str
    number: int
    save_dir: str
    trained: int

    @property
    def record(self) -> str:
        """The model's record of the last version it trained on."""
        return record_url(self.save_dir)


def record_url(save_dir: str) -> str:
    return fsio.join(save_dir, "version.json")


def _latest(config: RunConfig) -> Latest:
    root = fsio.canonical_url(config.root)
    number = versions.latest_number(root)
    if number is None:
        raise ConfigError(f"nothing has been published under {root}; run nmtpipe refresh first")
    vocab = versions.read_version(root, number)["vocab"]["path"].rsplit("/", 1)[-1]
    save_dir = fsio.join(root, "models", vocab)
    record = record_url(save_dir)
    trained = json.loads(fsio.read_bytes(record))["version"] if fsio.exists(record) else 0
    return Latest(versions.version_url(root, number), number, save_dir, trained)


def on_latest(
    step: str,
    config: RunConfig,
    log: Callable[[str], None],
    show: Show,
    verbose: bool = False,
    rank_module: str | None = None,
) -> bool:
    """Train (`step` "train") or decode on the latest version, unless done already;
    returns whether it ran."""
    latest = _latest(config)
    job = (_train if step == "train" else _decode)(config, latest, log)
    if job is None:
        return False
    show(step, run_job(job, config.nproc.get(step, 1), verbose, rank_module=rank_module))
    if step == "train":
        fsio.write_bytes(latest.record, json.dumps({"version": latest.number}).encode())
    return True


def _train(config: RunConfig, latest: Latest, log: Callable[[str], None]) -> Job | None:
    """The training job that continues the vocabulary's model on the latest version
    (`train_updates` more updates per version), or None if it has trained on it."""
    if latest.trained >= latest.number:
        log(f"{latest.save_dir} has trained on version {latest.number:06d} already")
        return None
    # Each version is new data for the same model: continue it (fairseq's reset).
    job = dataclasses.replace(
        config.train, data=latest.data, save_dir=latest.save_dir, reset_data=True
    )
    updates = config.refresh.train_updates
    if updates:
        summary = fsio.join(latest.save_dir, SUMMARY)
        done = json.loads(fsio.read_bytes(summary))["updates"] if fsio.exists(summary) else 0
        job = dataclasses.replace(job, max_update=done + updates)
    log(f"training on {latest.data} in {latest.save_dir}")
    return job


def _decode(config: RunConfig, latest: Latest, log: Callable[[str], None]) -> Job | None:
    """The decoding job of the latest version's test split with the model trained on
    it, into `translations/NNNNNN/` (scores.json tracks quality across versions), or
    None if done."""
    if latest.trained < latest.number:
        raise ConfigError(f"no model has trained on version {latest.number:06d} yet; use --train")
    out = fsio.join(fsio.canonical_url(config.root), "translations", f"{latest.number:06d}")
    if fsio.exists(fsio.join(out, SCORES)):
        log(f"{out} is decoded already")
        return None
    best = fsio.join(latest.save_dir, BEST)
    checkpoint = best if fsio.exists(best) else fsio.join(latest.save_dir, LAST)
    return dataclasses.replace(config.decode, checkpoint=checkpoint, data=latest.data, output=out)
