"""What the torch jobs leave, by name: training's `--save-dir` (fairseq's names),
decoding's and scoring's `--output`, and which checkpoint a folder given for one means.

No torch here: the workflow reads these files to report and to chain steps.
"""

from __future__ import annotations

import re

from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage import fsio

LAST, BEST = "checkpoint_last.pt", "checkpoint_best.pt"
AVERAGE = "checkpoint_avg.pt"  # the mean of the last numbered checkpoints' weights
SUMMARY = "train_summary.json"  # what the run ended with (updates, losses, speed)
LOG = "train_log.jsonl"  # every record training logged, as of its last checkpoint
CURVES_SVG, CURVES_JSON = "learning_curve.svg", "learning_curve.json"  # and their points
HYPOTHESES, NBEST = "hypotheses.txt", "nbest.jsonl"  # decoding's translations
SCORES = "scores.json"  # decoding's scores and counts; written last, its commit mark
SCORE_SUMMARY = "score_summary.json"  # what `nmtpipe score` scored, from what; written last
NUMBERED = re.compile(r"^checkpoint(\d+)_(\d+)\.pt$")


def numbered(epoch: int, update: int) -> str:
    return f"checkpoint{epoch}_{update}.pt"


def checkpoint_file(url: str, option: str = "--checkpoint") -> str:
    """`url` as a checkpoint file: itself, or where it is a folder (a --save-dir) the
    best checkpoint in it; a folder without one is a usage error saying what it holds."""
    if not fsio.is_folder(url):
        return url
    best = fsio.join(url, BEST)
    if fsio.exists(best):
        return best
    raise ConfigError(f"{option} {folder_given(url)}")


def folder_given(url: str) -> str:
    """What a user reads who gave the folder `url` where a checkpoint file goes: the
    checkpoints in it, the best and the last first, then the newest numbered ones."""
    names = {found.rsplit("/", 1)[-1] for found in fsio.find(url)}
    numbered_ = sorted((n for n in names if NUMBERED.match(n)), key=_update, reverse=True)
    held = [n for n in (BEST, LAST, AVERAGE) if n in names] + numbered_
    listed = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
    what = f"give a checkpoint in it: {listed}" if held else "it holds no checkpoint"
    return f"{url} is a folder, not a checkpoint file; {what}"


def _update(name: str) -> int:
    match = NUMBERED.match(name)
    return int(match.group(2)) if match else -1
