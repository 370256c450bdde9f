"""Checkpoint averaging, as fairseq's `average_checkpoints.py` and T2T's `avg_checkpoints`
do it: the element-wise mean of several checkpoints' weights, usually the last few of a
run, which evens out the noise of the last updates.

The average is a model to decode with, not to resume from: it keeps the first
checkpoint's configs and vocabulary fingerprint, and no optimiser state.
"""

from __future__ import annotations

from typing import Any

import torch

from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.trainers.runtime.run_files import AVERAGE
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.storage import fsio


def average(urls: list[str]) -> dict[str, Any]:
    """The state of `urls[0]` with its weights replaced by the mean over all `urls`
    (summed in float64, stored in each weight's own dtype); checkpoints of another
    model shape or vocabulary are refused, naming the file."""
    if not urls:
        raise InputError("no checkpoints to average")
    first = checkpoint.load(urls[0])
    sums = {name: value.to(torch.float64) for name, value in first["model"].items()}
    for url in urls[1:]:
        state = checkpoint.load(url)
        for key in ("model_config", "vocab_fingerprint"):
            if state.get(key) != first.get(key):
                raise InputError(f"{url} differs from {urls[0]} in its {key}: cannot average")
        for name, value in state["model"].items():
            sums[name] += value.to(torch.float64)
    model = {
        name: (total / len(urls)).to(first["model"][name].dtype) for name, total in sums.items()
    }
    keep = ("model_config", "train_config", "vocab_fingerprint", "position")
    return {"model": model, **{k: first[k] for k in keep if k in first},
            "averaged": [url.rsplit("/", 1)[-1] for url in urls]}  # fmt: skip


def write_average(save_dir: str, n: int, output: str | None = None) -> tuple[str, list[str]]:
    """Average the `n` newest numbered checkpoints of `save_dir` into `output` (default
    `save_dir/checkpoint_avg.pt`); where it went and what it averaged."""
    urls = checkpoint.numbered_checkpoints(save_dir)[-n:] if n > 0 else []
    if not urls:
        raise InputError(f"{save_dir} has no numbered checkpoints to average")
    out = output or fsio.join(save_dir, AVERAGE)
    checkpoint.save(out, average(urls))
    return out, urls
