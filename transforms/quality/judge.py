"""What a shard writer asks of the scorers: the shard's pairs scored, and those that the
near-duplicate groups or the scorers' thresholds reject, as rejects that keep their
scores, their id and their normalised text (so that other thresholds can keep them
again without the corpus).

Scores go beside the kept pairs as float32 columns `score_NAME`, and into the stats as
histograms of kept and rejected pairs (bins of BIN), which the dataset report draws
with each threshold and from which thresholds are proposed (`thresholds.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.quality.base import Pairs, PairScorer
from nmtpipe.transforms.text.filters import Verdict
from nmtpipe.transforms.text.records import REJECTS_SCHEMA, SCORES, reject_rows

PREFIX = "score_"
BIN = 0.05  # histogram bins of every score
SPAN = 25.0  # scores beyond +-SPAN count in the end bins
NEAR_DUPLICATE = "near-duplicate"


def score_bins(values: np.ndarray) -> dict[int, int]:
    """{bin: how many} of the known values (bin k holds values near k * BIN)."""
    known = values[~np.isnan(values)]
    bins = np.rint(np.clip(known, -SPAN, SPAN) / BIN).astype(np.int64)
    found, counts = np.unique(bins, return_counts=True)
    return dict(zip(found.tolist(), counts.tolist(), strict=True))


class ChunkJudge:
    """Callable `(src lines, tgt lines) -> {row: Verdict}`: what the scorers that learn
    nothing (`PASSES = 0`: the rules) reject, judged where a chunk is cleaned; a pair
    failing several gets its first scorer's first reason."""

    def __init__(self, scorers: list[PairScorer], langs: tuple[str, str]) -> None:
        self.scorers, self.langs = scorers, langs

    def __call__(self, src: list[str], tgt: list[str]) -> dict[int, Verdict]:
        pairs = Pairs(src, tgt, self.langs)
        found: dict[int, Verdict] = {}
        for scorer in self.scorers:
            for verdicts in scorer.judge(scorer.score([], pairs), pairs, []):
                for row, said in zip(verdicts.rows.tolist(), verdicts.details, strict=True):
                    found.setdefault(row, Verdict(verdicts.reason, said))
        return found


class ShardJudge:
    """Scores and judges a shard's pairs (a table in PAIRS_SCHEMA, deduplicated): the
    learned `scorers` with what each learned (`learned`, by name); pairs from a
    reference set (`exempt`: valid and test inputs the user gave) are scored, never
    rejected."""

    def __init__(
        self,
        scorers: list[PairScorer],
        learned: Mapping[str, list[Any]],
        langs: tuple[str, str],
        exempt: frozenset[str] = frozenset(),
    ) -> None:
        self.scorers, self.learned, self.langs, self.exempt = scorers, learned, langs, exempt

    @property
    def columns(self) -> list[str]:
        return [column for scorer in self.scorers for column in scorer.COLUMNS]

    def __call__(
        self, table: pa.Table, near: Mapping[tuple[str, int], str]
    ) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
        """`table` judged: the pairs kept (with their score columns), the rejects, and
        the statistics partial of the scores; `near` maps the (origin, line) of each
        near-duplicate to what it repeats."""
        pairs = Pairs(table["src"].to_pylist(), table["tgt"].to_pylist(), self.langs)
        scores: dict[str, np.ndarray] = {}
        for scorer in self.scorers:
            scores.update(scorer.score(self.learned[scorer.NAME], pairs))
        reason = np.full(table.num_rows, "", dtype=object)
        detail = np.full(table.num_rows, "", dtype=object)
        if near:
            where = zip(table["origin"].to_pylist(), table["line"].to_pylist(), strict=True)
            for i, key in enumerate(where):
                if key in near:
                    reason[i], detail[i] = NEAR_DUPLICATE, near[key]
        for scorer in self.scorers:
            for verdicts in scorer.judge(scores, pairs, self.learned[scorer.NAME]):
                rows = verdicts.rows
                fresh = reason[rows] == ""
                reason[rows[fresh]] = verdicts.reason
                detail[rows[fresh]] = np.asarray(verdicts.details, dtype=object)[fresh]
        if self.exempt:
            origins = np.asarray(table["origin"].cast(pa.string()).to_pylist(), dtype=object)
            reason[np.isin(origins, list(self.exempt))] = ""
        gone = reason != ""
        rejects = [
            reject_rows(table, rows, name, detail[rows].tolist(), _score_maps(scores, rows))
            for name in dict.fromkeys(reason[gone].tolist())
            for rows in [np.flatnonzero(reason == name)]
        ]
        kept = table.filter(pa.array(~gone))
        for column, values in scores.items():
            kept = kept.append_column(PREFIX + column, pa.array(values[~gone], pa.float32()))
        stats = {
            column: {"kept": score_bins(values[~gone]), "rejected": score_bins(values[gone])}
            for column, values in scores.items()
        }
        judged = pa.concat_tables(rejects) if rejects else REJECTS_SCHEMA.empty_table()
        return kept, judged, {"scores": stats} if stats else {}


def _score_maps(scores: Mapping[str, np.ndarray], rows: np.ndarray) -> pa.Array:
    """Each row's scores as a map (NaN, no evidence, left out)."""
    maps = []
    for i in rows.tolist():
        items = [(c, float(v[i])) for c, v in scores.items() if not np.isnan(v[i])]
        maps.append(items)
    return pa.array(maps, SCORES)
