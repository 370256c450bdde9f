"""The fluency scorer: whether each side reads as its language does, by a character
bigram model of each side learned from the corpus itself.

A line's score is the mean, over its adjacent characters, of how much likelier the
second is after the first than by its frequency alone (log), the line's own counts taken
out (leave-one-out, as in `quality/model1.py`); pairs of characters too rare to judge are
skipped. Shuffled text, a bag of the right characters in no order, scores well below
text of the language (on benchmarks/corpora/make_pair_noise.py's corpus a median of -2.7,
against 0.7); the lexical score cannot see it.
The pair's score is its worse side's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nmtpipe.transforms.options import option
from nmtpipe.transforms.quality.base import (
    LearnedScorer,
    Pairs,
    Verdicts,
    finite_below,
    learned_verdicts,
    min_pairs_option,
)
from nmtpipe.transforms.quality.tables import CountTable, pair_keys
from nmtpipe.transforms.quality.units import Ragged, characters

# How much a bigram seen few times leans on the second character's frequency instead.
BLEND = 0.1


@dataclass(frozen=True)
class FluencyConfig:
    fluency_min: float = option(
        -3.5,
        metavar="S",
        help="fluency: reject a pair whose worse side reads less like its language than S: "
        "the mean, over its adjacent characters, of how much likelier (log) each is after "
        "the one before than alone, by a character model of the side learned from the "
        "corpus (text of the language mostly -1 to 1, shuffled characters mostly below -2)",
    )
    fluency_min_pairs: int = min_pairs_option("fluency")
    fluency_bits: int = option(
        21,
        metavar="B",
        help="fluency: 2**B cells in each side's table of character pairs (8 bytes each: "
        "32 MB at 21, and an eighth as many for characters alone)",
    )


@dataclass
class Characters:
    """A side's character and bigram counts, and how many characters and lines in all."""

    chars: CountTable
    bigrams: CountTable
    total: int
    lines: int = 0

    @classmethod
    def empty(cls, bits: int) -> Characters:
        return cls(CountTable.empty(bits - 3), CountTable.empty(bits), 0)

    def add(self, side: Ragged) -> None:
        self.chars.add(side.values)
        self.bigrams.add(_bigrams(side)[0])
        self.total += side.values.size
        self.lines += len(side.starts) - 1

    def merge(self, other: Characters) -> Characters:
        self.chars.merge(other.chars)
        self.bigrams.merge(other.bigrams)
        self.total += other.total
        self.lines += other.lines
        return self

    def score(self, side: Ragged, learned: np.ndarray) -> np.ndarray:
        """Per line, the mean log-likelihood ratio of its bigrams, leave-one-out where
        the line was `learned` from (NaN: none to judge)."""
        keys, first, second, line = _bigrams(side)
        mine = learned[line]  # whether the line's own counts are in the tables
        own_pair = _own(keys, line) * mine
        own_first = _own(side.values[first], line) * mine
        own_second = _own(side.values[second], line) * mine
        pair = np.maximum(self.bigrams.get(keys) - own_pair, 0)  # a cell shared with others
        before = self.chars.get(side.values[first]) - own_first
        after = self.chars.get(side.values[second]) - own_second
        rest = self.total - side.lengths[line] * mine
        use = (before > 0) & (after > 0) & (rest > 0)
        p_after = np.divide(after, rest, out=np.ones(after.size), where=use)
        p_given = (pair + BLEND * p_after) / np.where(use, before + BLEND, 1.0)
        llr = np.log(np.where(use, p_given, 1.0)) - np.log(p_after)
        lines = len(side.starts) - 1
        n = np.bincount(line[use], minlength=lines)
        total = np.bincount(line[use], weights=llr[use], minlength=lines)
        return np.divide(total, n, out=np.full(lines, np.nan), where=n > 0)


def _bigrams(side: Ragged) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every two adjacent characters of each line: (their keys, the index of the first,
    of the second, the line)."""
    first = np.arange(side.values.size - 1)
    owner = side.owner
    inside = owner[:-1] == owner[1:]
    first = first[inside]
    return pair_keys(side.values[first], side.values[first + 1]), first, first + 1, owner[first]


def _own(keys: np.ndarray, line: np.ndarray) -> np.ndarray:
    """How often each key occurs in its own line (what the line added to the counts)."""
    if keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, inverse, counts = np.unique(
        pair_keys(line.astype(np.uint64), keys), return_inverse=True, return_counts=True
    )
    return counts[inverse.ravel()]


class FluencyScorer(LearnedScorer):
    NAME = "fluency"
    Config = FluencyConfig
    COLUMNS = ("fluency",)
    REASONS = ("fluency",)
    PASSES = 1
    THRESHOLDS = ("fluency_min", "fluency_min_pairs")
    CATCHES = "shuffled or garbled text: characters of the right script in no language's order"
    COSTS = (
        "one pass over the train pairs (at most --learn-pairs of them) and one over all to "
        "score; tables of a fixed size whatever "
        "the corpus (--fluency-bits)"
    )

    def start(self, pass_: int) -> Any:
        return [Characters.empty(self.config.fluency_bits) for _ in range(2)]

    def gather(self, pass_: int, learned: list[Any], acc: Any, pairs: Pairs) -> None:
        for side, lines in zip(acc, (pairs.src, pairs.tgt), strict=True):
            side.add(characters(lines))  # type: ignore[arg-type]

    def merge(self, acc: Any, other: Any) -> Any:
        return [mine.merge(theirs) for mine, theirs in zip(acc, other, strict=True)]

    def score(self, learned: list[Any], pairs: Pairs) -> dict[str, np.ndarray]:
        rows = pairs.learned_rows()
        sides = [
            model.score(characters(lines), rows)
            for model, lines in zip(learned[0], (pairs.src, pairs.tgt), strict=True)  # type: ignore[arg-type]
        ]
        worse = np.fmin(*sides)  # NaN only where both are
        return {"fluency": worse.astype(np.float32)}

    def learned_pairs(self, learned: list[Any]) -> int:
        return int(learned[0][0].lines)

    def verdicts(self, scores: dict[str, np.ndarray], learned_pairs: int) -> list[Verdicts]:
        limit, values = self.config.fluency_min, scores["fluency"]
        return learned_verdicts(
            "fluency",
            values,
            finite_below(values, limit),
            (learned_pairs, self.config.fluency_min_pairs),
            lambda s: f"a side reads little like its language: fluency {s:.2f} < {limit:g}",
        )
