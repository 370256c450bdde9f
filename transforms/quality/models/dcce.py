"""The model score: dual conditional cross-entropy (Junczys-Dowmunt 2018), from a forward
(src→tgt) and a backward (tgt→src) model the user trained on a trusted corpus.

A pair that translates each other is likely under both models, and about equally
likely: the score punishes a high cross-entropy either way and a disagreement between
the two, which catches a target that says something else (misaligned), says only part
(partial) or says nothing (shuffled) better than any count of words can. It needs
models, so it is no `prepare` scorer: `nmtpipe score` (a torch job) writes its score
files beside a prepared dataset's train shards, one per shard and row for row, and
`nmtpipe rethreshold --dcce-scores` judges by them. This module holds what both sides
share and needs no torch: the formula, the files' schema and names, and the verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.quality.base import Verdicts, finite_below
from nmtpipe.transforms.storage import fsio

NAME = "dcce"
# A score file, row for row with its train shard (its `id` checks that it is).
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("h_fwd", pa.float32()),  # H(tgt | src) by the forward model, nats per token
        ("h_bwd", pa.float32()),  # H(src | tgt) by the backward model
        (NAME, pa.float32()),
    ]
)


def dcce(h_fwd: np.ndarray, h_bwd: np.ndarray) -> np.ndarray:
    """The paper's score of length-normalised cross-entropies (nats): exp(-(|H_fwd -
    H_bwd| + (H_fwd + H_bwd) / 2)), in (0, 1], higher is better."""
    h_fwd, h_bwd = np.asarray(h_fwd, np.float64), np.asarray(h_bwd, np.float64)
    return np.exp(-(np.abs(h_fwd - h_bwd) + 0.5 * (h_fwd + h_bwd)))


def scores_for(scores_dir: str, shard_path: str, ids: np.ndarray) -> np.ndarray:
    """The DCCE of a train shard's pairs (`ids`, in the shard's order) from its score
    file in `scores_dir`; a file of other pairs is an error naming it."""
    url = fsio.join(scores_dir, shard_path)
    try:
        table = fsio.read_parquet(url, columns=["id", NAME])
    except FileNotFoundError:
        raise InputError(f"{url}: no DCCE scores for {shard_path}; run nmtpipe score") from None
    if not np.array_equal(table["id"].to_numpy(), ids):
        raise InputError(
            f"{url}: its pairs are not those of {shard_path} (scored for another prepared "
            "dataset?); run nmtpipe score on this one"
        )
    return table[NAME].to_numpy().astype(np.float32)


@dataclass(frozen=True)
class DcceThreshold:
    """The threshold, and what the scores were computed from (recorded in the manifest)."""

    dcce_min: float
    scores: str  # the folder `nmtpipe score` wrote
    forward: dict[str, str]  # the forward model's checkpoint: url and sha256
    backward: dict[str, str]


class DcceScorer:
    """Judges pairs by their DCCE score, as a learned scorer judges by its thresholds
    (`judge.decide`); it learns nothing from the corpus it judges."""

    NAME: ClassVar[str] = NAME
    COLUMNS: ClassVar[tuple[str, ...]] = (NAME,)
    REASONS: ClassVar[tuple[str, ...]] = (NAME,)

    def __init__(self, config: DcceThreshold) -> None:
        self.config = config

    def verdicts(self, scores: dict[str, np.ndarray], learned_pairs: int) -> list[Verdicts]:
        """The pairs scored below --dcce-min (unscored ones, NaN, are kept)."""
        limit, values = self.config.dcce_min, scores[NAME]
        rows = finite_below(values, limit)
        said = [f"the models disagree or doubt: dcce {v:.4f} < {limit:g}" for v in values[rows]]
        return [Verdicts(NAME, rows, said)]
