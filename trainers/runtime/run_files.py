"""What the torch jobs leave, by name: training's `--save-dir` (fairseq's names) and
decoding's `--output`.

No torch here: the workflow reads these files to report and to chain steps.
"""

from __future__ import annotations

import re

LAST, BEST = "checkpoint_last.pt", "checkpoint_best.pt"
AVERAGE = "checkpoint_avg.pt"  # the mean of the last numbered checkpoints' weights
SUMMARY = "train_summary.json"  # what the run ended with (updates, losses, speed)
LOG = "train_log.jsonl"  # every record training logged, as of its last checkpoint
CURVES_SVG, CURVES_JSON = "learning_curve.svg", "learning_curve.json"  # and their points
HYPOTHESES, NBEST = "hypotheses.txt", "nbest.jsonl"  # decoding's translations
SCORES = "scores.json"  # decoding's scores and counts; written last, its commit mark
NUMBERED = re.compile(r"^checkpoint(\d+)_(\d+)\.pt$")


def numbered(epoch: int, update: int) -> str:
    return f"checkpoint{epoch}_{update}.pt"
