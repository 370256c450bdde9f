"""What a shard writer asks of the scorers: the shard's pairs scored, and those that the
near-duplicate groups or the scorers' thresholds reject, as rejects that keep their
scores, their id and their normalised text (so that other thresholds can keep them
again without the corpus).

Scores go beside the kept pairs as float32 columns `score_NAME`, and into the stats as
histograms of kept and rejected pairs (bins of BIN), which the dataset report draws
with each threshold and from which thresholds are proposed (`thresholds.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.quality.base import (
    LEARN_ALL,
    LearnedScorer,
    Pairs,
    PairScorer,
    learned_rows,
)
from nmtpipe.transforms.quality.models.dcce import DcceScorer
from nmtpipe.transforms.text.filters import Verdict
from nmtpipe.transforms.text.records import (
    PAIRS_SCHEMA,
    REJECTS_SCHEMA,
    SCORES,
    SORT_KEYS,
    reject_rows,
)

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
    learned `scorers` with what each learned (`learned`, by name) from the pairs with
    ids below `limit` (`base.learned_rows`), the scores of the pairs outside it mapped by
    `matched` ({column: map}, `matching.py`); pairs from a reference set (`exempt`: valid
    and test inputs the user gave) are scored, never rejected."""

    def __init__(
        self,
        scorers: list[LearnedScorer],
        learned: Mapping[str, list[Any]],
        langs: tuple[str, str],
        exempt: frozenset[str] = frozenset(),
        limit: int = LEARN_ALL,
        matched: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
    ) -> None:
        self.scorers, self.learned, self.langs, self.exempt = scorers, learned, langs, exempt
        self.limit, self.matched = limit, matched or {}

    @property
    def columns(self) -> list[str]:
        return [column for scorer in self.scorers for column in scorer.COLUMNS]

    def __call__(
        self, table: pa.Table, near: Mapping[tuple[str, int], str]
    ) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
        """`table` judged: the pairs kept (with their score columns), the rejects, and
        the statistics partial of the scores (and how many pairs' scores were matched,
        by column); `near` maps the (origin, line) of each near-duplicate to what it
        repeats."""
        learned = learned_rows(table["id"].to_numpy(), self.limit)
        pairs = Pairs(table["src"].to_pylist(), table["tgt"].to_pylist(), self.langs, learned)
        scores: dict[str, np.ndarray] = {}
        for scorer in self.scorers:
            scores.update(scorer.score(self.learned[scorer.NAME], pairs))
        matched = {}
        if learned is not None:
            outside = ~learned
            for column, match in self.matched.items():
                scores[column][outside] = match(scores[column][outside])
                matched[column] = int(outside.sum())
        learned = {s.NAME: s.learned_pairs(self.learned[s.NAME]) for s in self.scorers}
        by = Thresholds(self.scorers, learned, self.exempt)
        kept, judged, stats = decide(table, scores, by, near)
        return kept, judged, {**stats, "matched": matched} if matched else stats


@dataclass(frozen=True)
class Thresholds:
    """What decides a scored pair's fate: the learned `scorers` by their thresholds,
    each having learned from `learned[NAME]` train pairs (and the model score, which
    learns nothing, by its own: `models/dcce.py`); `exempt` origins never rejected."""

    scorers: list[LearnedScorer | DcceScorer]
    learned: Mapping[str, int]
    exempt: frozenset[str] = frozenset()


def decide(
    table: pa.Table,
    scores: Mapping[str, np.ndarray],
    by: Thresholds,
    near: Mapping[tuple[str, int], str],
) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
    """Scored pairs (`table` in PAIRS_SCHEMA, `scores` row for row) judged: the pairs
    kept with their score columns, the rejects with their scores, and the statistics
    partial of the scores. A near-duplicate (`near`) goes first, then each scorer's
    first reason in the scorers' order."""
    reason = np.full(table.num_rows, "", dtype=object)
    detail = np.full(table.num_rows, "", dtype=object)
    if near:
        where = zip(table["origin"].to_pylist(), table["line"].to_pylist(), strict=True)
        for i, key in enumerate(where):
            if key in near:
                reason[i], detail[i] = NEAR_DUPLICATE, near[key]
    for scorer in by.scorers:
        for verdicts in scorer.verdicts(dict(scores), by.learned[scorer.NAME]):
            rows = verdicts.rows
            fresh = reason[rows] == ""
            reason[rows[fresh]] = verdicts.reason
            detail[rows[fresh]] = np.asarray(verdicts.details, dtype=object)[fresh]
    if by.exempt:
        origins = np.asarray(table["origin"].cast(pa.string()).to_pylist(), dtype=object)
        reason[np.isin(origins, list(by.exempt))] = ""
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


def rejudge(
    kept: pa.Table, judged: pa.Table, columns: list[str], by: Thresholds
) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
    """A prepared shard judged again by other thresholds, without the corpus: its pairs
    (`kept`: PAIRS_SCHEMA and the score columns `columns`) and those of its pairs that
    the scorers or the near-duplicate groups rejected (`judged`: REJECTS_SCHEMA, with
    their scores), as `decide` would have judged them all; near-duplicates stay so."""
    restored = pa.Table.from_arrays(
        [
            judged["id"],
            judged["src"].cast(pa.string()),
            judged["tgt"].cast(pa.string()),
            judged["origin"],
            judged["line"],
            judged["src_raw"],
            judged["tgt_raw"],
        ],
        schema=PAIRS_SCHEMA,
    )
    table = pa.concat_tables([kept.select(PAIRS_SCHEMA.names), restored])
    scores = {
        column: np.concatenate(
            [kept[PREFIX + column].to_numpy(zero_copy_only=False), _from_maps(judged, column)]
        ).astype(np.float32)
        for column in columns
    }
    order = pc.sort_indices(table, SORT_KEYS).to_numpy()
    near_rows = judged.filter(pc.equal(judged["reason"], NEAR_DUPLICATE))
    near = dict(
        zip(
            zip(near_rows["origin"].to_pylist(), near_rows["line"].to_pylist(), strict=True),
            near_rows["detail"].to_pylist(),
            strict=True,
        )
    )
    sorted_scores = {column: values[order] for column, values in scores.items()}
    return decide(table.take(pa.array(order)), sorted_scores, by, near)


def _from_maps(judged: pa.Table, column: str) -> np.ndarray:
    """Each reject's score `column` from its scores map (NaN where it has none)."""
    values = np.full(judged.num_rows, np.nan, dtype=np.float32)
    for i, items in enumerate(judged["scores"].to_pylist()):
        for name, value in items or ():
            if name == column:
                values[i] = value
    return values


def _score_maps(scores: Mapping[str, np.ndarray], rows: np.ndarray) -> pa.Array:
    """Each row's scores as a map (NaN, no evidence, left out)."""
    maps = []
    for i in rows.tolist():
        items = [(c, float(v[i])) for c, v in scores.items() if not np.isnan(v[i])]
        maps.append(items)
    return pa.array(maps, SCORES)
