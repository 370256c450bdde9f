"""Training and decoding on a refresh's latest version (`nmtpipe refresh --train
--decode`), after the root's lock is released: training takes long, and a version is
immutable. The model of a vocabulary lives in `models/{vocab}/` and continues on each
new version; each version's test split is translated into `translations/NNNNNN/`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from nmtpipe.pipelines.workflow.run import Show
from nmtpipe.pipelines.workflow.run_config import RunConfig
from nmtpipe.trainers.runtime.run_files import BEST, LAST, SCORES, SUMMARY
from nmtpipe.trainers.train.launch import run_job
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage import fsio, versions


def _latest(config: RunConfig) -> tuple[str, int, str]:
    """The latest version's URL and number, and where its vocabulary's model trains."""
    root = fsio.canonical_url(config.root)
    number = versions.latest_number(root)
    if number is None:
        raise ConfigError(f"nothing has been published under {root}; run nmtpipe refresh first")
    vocab = versions.read_version(root, number)["vocab"]["path"].rsplit("/", 1)[-1]
    return versions.version_url(root, number), number, fsio.join(root, "models", vocab)


def train_latest(
    config: RunConfig,
    log: Callable[[str], None],
    show: Show,
    verbose: bool = False,
    rank_module: str | None = None,
) -> bool:
    """Continue training on the latest version, unless done already (run it after the
    lock is released: training takes long, and a version is immutable). The model of a
    vocabulary lives in `models/{vocab}/`; `train_updates` adds that many updates
    per new version. Returns whether it trained."""
    data, number, save_dir = _latest(config)
    record = fsio.join(save_dir, "version.json")
    if fsio.exists(record) and json.loads(fsio.read_bytes(record))["version"] >= number:
        log(f"{save_dir} has trained on version {number:06d} already")
        return False
    # Each version is new data for the same model: continue it (fairseq's reset).
    job = dataclasses.replace(config.train, data=data, save_dir=save_dir, reset_data=True)
    updates = config.refresh.train_updates
    if updates:
        summary = fsio.join(save_dir, SUMMARY)
        done = json.loads(fsio.read_bytes(summary))["updates"] if fsio.exists(summary) else 0
        job = dataclasses.replace(job, max_update=done + updates)
    log(f"training on {data} in {save_dir}")
    show("train", run_job(job, config.nproc.get("train", 1), verbose, rank_module=rank_module))
    fsio.write_bytes(record, json.dumps({"version": number}).encode())
    return True


def decode_latest(
    config: RunConfig,
    log: Callable[[str], None],
    show: Show,
    verbose: bool = False,
    rank_module: str | None = None,
) -> bool:
    """Translate the latest version's test split with the model trained on it, into
    `translations/NNNNNN/` (scores.json tracks quality across versions), unless done."""
    data, number, save_dir = _latest(config)
    record = fsio.join(save_dir, "version.json")
    if not fsio.exists(record) or json.loads(fsio.read_bytes(record))["version"] < number:
        raise ConfigError(f"no model has trained on version {number:06d} yet; use --train")
    out = fsio.join(fsio.canonical_url(config.root), "translations", f"{number:06d}")
    if fsio.exists(fsio.join(out, SCORES)):
        log(f"{out} is decoded already")
        return False
    best = fsio.join(save_dir, BEST)
    checkpoint = best if fsio.exists(best) else fsio.join(save_dir, LAST)
    job = dataclasses.replace(config.decode, checkpoint=checkpoint, data=data, output=out)
    show("decode", run_job(job, config.nproc.get("decode", 1), verbose, rank_module=rank_module))
    return True
