"""The lexical scorer: how much of each side the other side explains, by IBM Model 1
learned from the corpus itself in both directions (`quality/model1.py`).

Why Model 1: its statistics are sums over pairs (each EM iteration one pass of a
combiner, in tables of a fixed size), it needs no pretrained model and no aligner, and
its score has a meaning that carries across corpora: how much likelier each unit of one
side is given the other side than by its frequency alone (0: not at all). Two
iterations; each pair scored leave-one-out.

Catches misaligned pairs (neither side explains the other) and many partial ones (half
a side unexplained); not shuffled text (a bag of units keeps its score: `fluency.py`)
nor changed numbers (`rules.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nmtpipe.transforms.options import option
from nmtpipe.transforms.quality import model1
from nmtpipe.transforms.quality.base import (
    LearnedScorer,
    Pairs,
    Verdicts,
    finite_below,
    learned_verdicts,
    min_pairs_option,
)
from nmtpipe.transforms.quality.model1 import Direction
from nmtpipe.transforms.quality.tables import CountTable
from nmtpipe.transforms.quality.units import Ragged

SIDES = ("src", "tgt")


@dataclass(frozen=True)
class LexicalConfig:
    lexical_min: float = option(
        0.25,
        metavar="S",
        help="lexical: reject a pair whose sides explain each other less than S: the mean, "
        "over both directions, of how much likelier (log) each unit of one side is given "
        "the other side than alone, by IBM Model 1 learned from the corpus (0: no more "
        "than chance; correct pairs mostly 1 to 3)",
    )
    lexical_min_pairs: int = min_pairs_option("lexical")
    lexical_bits: int = option(
        21,
        metavar="B",
        help="lexical: 2**B cells in each table of word pairs (8 bytes each; four tables and "
        "four a quarter that size: about 90 MB at 21); more, fewer pairs share a cell",
    )


@dataclass
class Counted:
    """Pass 1: each side's units counted once per line, and Model 1's first iteration
    in both directions (forward: the target explained by the source)."""

    units: list[CountTable]  # per side
    lines: np.ndarray  # units counted per side, in all
    directions: list[Direction]  # forward, backward
    pairs: int = 0

    def seen(self, direction: int) -> tuple[CountTable, CountTable]:
        """The line counts of direction's (source side, target side): 0 forward."""
        source, target = self.units if direction == 0 else self.units[::-1]
        return source, target

    def merge(self, other: Counted) -> Counted:
        for mine, theirs in zip(
            self.units + self.directions, other.units + other.directions, strict=True
        ):
            mine.merge(theirs)
        self.lines += other.lines
        self.pairs += other.pairs
        return self


def _directions(sides: tuple[Ragged, Ragged]) -> list[tuple[Ragged, Ragged]]:
    """(source, target) of the forward direction, then of the backward one."""
    return [sides, sides[::-1]]


class LexicalScorer(LearnedScorer):
    NAME = "lexical"
    Config = LexicalConfig
    COLUMNS = ("lexical",)
    REASONS = ("lexical",)
    PASSES = 2
    MATCH_OUTSIDE = True
    THRESHOLDS = ("lexical_min", "lexical_min_pairs")
    CATCHES = (
        "misaligned pairs (a sentence beside another's translation) and many partial "
        "translations: sides that do not explain each other"
    )
    COSTS = (
        "two passes over the train pairs (at most --learn-pairs of them; Model 1's two "
        "iterations) and one over all to score; past --learn-pairs, up to 100,000 pairs "
        "scored once more to match the scores outside the sample to those inside it; "
        "tables of a fixed size whatever the corpus (--lexical-bits)"
    )

    def start(self, pass_: int) -> Any:
        links, units_ = self.config.lexical_bits, self.config.lexical_bits - 2
        directions = [Direction.empty(links, units_) for _ in SIDES]
        if pass_ == 1:
            units = [CountTable.empty(units_) for _ in SIDES]
            return Counted(units, np.zeros(2, dtype=np.int64), directions)
        return directions

    def gather(self, pass_: int, learned: list[Any], acc: Any, pairs: Pairs) -> None:
        sides = pairs.units
        if pass_ == 1:
            for table, side in zip(acc.units, sides, strict=True):
                table.add(side.values)
            acc.lines += [side.values.size for side in sides]
            acc.pairs += len(pairs)
            for direction, (src, tgt) in zip(acc.directions, _directions(sides), strict=True):
                model1.count_uniform(direction, src, tgt)
            return
        counted: Counted = learned[0]
        for k, (src, tgt) in enumerate(_directions(sides)):
            model1.count_posterior(acc[k], counted.directions[k], counted.seen(k), src, tgt)

    def merge(self, acc: Any, other: Any) -> Any:
        if isinstance(acc, Counted):
            return acc.merge(other)
        return [mine.merge(theirs) for mine, theirs in zip(acc, other, strict=True)]

    def score(self, learned: list[Any], pairs: Pairs) -> dict[str, np.ndarray]:
        counted, second = learned
        rows = pairs.learned_rows()
        found = [
            model1.explained(
                counted.directions[k],
                second[k],
                counted.seen(k),
                int(counted.lines[1 - k]),
                src,
                tgt,
                rows,
            )
            for k, (src, tgt) in enumerate(_directions(pairs.units))
        ]
        return {"lexical": _mean(*found).astype(np.float32)}

    def learned_pairs(self, learned: list[Any]) -> int:
        return int(learned[0].pairs)

    def verdicts(self, scores: dict[str, np.ndarray], learned_pairs: int) -> list[Verdicts]:
        limit, values = self.config.lexical_min, scores["lexical"]
        return learned_verdicts(
            "lexical",
            values,
            finite_below(values, limit),
            (learned_pairs, self.config.lexical_min_pairs),
            lambda s: f"the sides explain each other little: lexical {s:.2f} < {limit:g}",
        )


def _mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row by row, the mean of the known values of `a` and `b` (NaN where neither is)."""
    known = (~np.isnan(a)).astype(np.int64) + ~np.isnan(b)
    total = np.nan_to_num(a) + np.nan_to_num(b)
    return np.divide(total, known, out=np.full(a.shape, np.nan), where=known > 0)
