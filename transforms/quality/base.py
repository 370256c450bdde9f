"""What a pair scorer is: one class that knows its options, what it learns from the
corpus (in passes of a combiner, in tables of a fixed size), the score columns it adds
beside the pairs and the rejects it decides by its thresholds.

`nmtpipe prepare --scorers NAME,...` picks scorers from `registry.py`. A scorer that
learns nothing (`PASSES = 0`) judges each chunk where it is cleaned; one that learns
gathers its statistics over the train pairs first and judges each shard where it is
written (`transforms/beam/quality.py` wires both). Near-duplicates are found across
pairs, not pair by pair: `DuplicateKeys`, whose keys the Beam layer groups.

A new scorer is a module in `kinds/` (its class and its `Config`) and a `register`
line, which gives `prepare` its options (CLI and YAML) and the reference pages their rows.
"""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from nmtpipe.transforms.options import count
from nmtpipe.transforms.quality.units import Ragged, distinct, word_units
from nmtpipe.transforms.text.split import ID_RANGE


class Pairs:
    """Normalised pairs, row for row: what a scorer looks at, and what is derived from
    them once for every scorer (each line's distinct units, `units.py`); `learned`:
    which rows the learned scorers learned from (None: all; `learned_rows`)."""

    def __init__(
        self,
        src: Sequence[str],
        tgt: Sequence[str],
        langs: tuple[str, str],
        learned: np.ndarray | None = None,
    ) -> None:
        self.src, self.tgt, self.langs, self.learned = src, tgt, langs, learned

    def __len__(self) -> int:
        return len(self.src)

    def learned_rows(self) -> np.ndarray:
        """Per row, whether its own counts are in what the scorers learned (to be taken
        back out when it is scored)."""
        return np.ones(len(self), dtype=bool) if self.learned is None else self.learned

    @functools.cached_property
    def units(self) -> tuple[Ragged, Ragged]:
        """Each side's distinct units per line."""
        return distinct(word_units(self.src)), distinct(word_units(self.tgt))  # type: ignore[arg-type]


# Which train pairs the learned scorers learn from: all of a corpus up to a bound
# (--learn-pairs), and a sample of about that many beyond it. Learning is about half of
# `lexical`'s cost at 1M pairs; a sample bounds it whatever the corpus's size, and every
# pair is still scored (a smaller sample learns less: docs/commands/prepare.md). A pair's
# id is a keyed hash of its text, uniform over [0, ID_RANGE) (`text/split.py`): the rows
# whose id lies below a limit are a sample that every runner, worker and retry picks
# alike, a pair's exact duplicates with it. A pair learned from is scored with its own
# counts taken back out (leave-one-out); one outside the sample added nothing to take
# back, so the scorers are told which is which (`Pairs.learned`).

# The limit that means every pair: the largest int64 (what Beam's coders carry), which
# no sample's limit reaches.
LEARN_ALL = ID_RANGE - 1


def sample_limit(pairs: int, wanted: int) -> int:
    """The id below which about `wanted` of `pairs` pairs lie (LEARN_ALL where `wanted`
    is 0, no bound, or the pairs are no more)."""
    if wanted == 0 or pairs <= wanted:
        return LEARN_ALL
    return ID_RANGE * wanted // pairs


def learned_rows(ids: np.ndarray, limit: int) -> np.ndarray | None:
    """Which of the pairs with `ids` the scorers learned from, given the id `limit`:
    None where every pair is."""
    return None if limit >= LEARN_ALL else ids < limit


@dataclass(frozen=True)
class Verdicts:
    """The rows a scorer rejects for one reason, and why each (a detail per row)."""

    reason: str
    rows: np.ndarray
    details: list[str]


class Scorer(ABC):
    """The options and documentation every kind has."""

    NAME: ClassVar[str]  # its name in --scorers
    Config: ClassVar[type]  # its options (their names are flags: unique across kinds)
    CATCHES: ClassVar[str]  # what it catches, for the reference page
    COSTS: ClassVar[str]  # what it costs, likewise

    def __init__(self, config: Any) -> None:
        self.config = config


class PairScorer(Scorer):
    """Scores each pair by itself, and rejects by its thresholds."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()  # its float32 score columns (none: verdicts only)
    REASONS: ClassVar[tuple[str, ...]]  # the reject reasons it gives
    PASSES: ClassVar[int] = 0  # passes over the train pairs before it scores (`LearnedScorer`)

    @abstractmethod
    def score(self, learned: list[Any], pairs: Pairs) -> dict[str, np.ndarray]:
        """Its columns' scores of `pairs` (NaN: no evidence), given what each pass
        learned."""

    @abstractmethod
    def judge(
        self, scores: dict[str, np.ndarray], pairs: Pairs, learned: list[Any]
    ) -> list[Verdicts]:
        """The rows it rejects, by reason: by its thresholds on its `scores` (a scorer
        without columns judges the `pairs` themselves), given what it `learned`."""


class LearnedScorer(PairScorer):
    """A pair scorer that first learns from the train pairs: pass k (1-based) starts an
    accumulator, gathers batches into it knowing what the earlier passes learned, and
    partial accumulators merge (by addition: any order gives the same result)."""

    PASSES: ClassVar[int] = 1
    # Whether its scores of pairs outside the sample are matched to those inside it
    # (`matching.py`): where its leave-one-out takes back only part of what a pair taught
    # it (`lexical`'s second pass, not its first), so the two groups score differently.
    MATCH_OUTSIDE: ClassVar[bool] = False
    # Its options that only judge, never change what it learns or scores: another value
    # re-judges a prepared dataset from its score columns and rejects, without the corpus
    # (`nmtpipe rethreshold`).
    THRESHOLDS: ClassVar[tuple[str, ...]]

    @abstractmethod
    def start(self, pass_: int) -> Any:
        """An empty accumulator of pass `pass_`."""

    @abstractmethod
    def gather(self, pass_: int, learned: list[Any], acc: Any, pairs: Pairs) -> None:
        """`pairs` added into `acc`, given what the earlier passes `learned`."""

    @abstractmethod
    def merge(self, acc: Any, other: Any) -> Any:
        """Two accumulators of one pass as one."""

    @abstractmethod
    def learned_pairs(self, learned: list[Any]) -> int:
        """How many train pairs it learned from (what its least-pairs option is held to;
        recorded in `stats.json` for `nmtpipe rethreshold`)."""

    @abstractmethod
    def verdicts(self, scores: dict[str, np.ndarray], learned_pairs: int) -> list[Verdicts]:
        """The rows it rejects by its thresholds on its `scores`, having learned from
        `learned_pairs` train pairs: all a re-judging needs."""

    def judge(
        self, scores: dict[str, np.ndarray], pairs: Pairs, learned: list[Any]
    ) -> list[Verdicts]:
        return self.verdicts(scores, self.learned_pairs(learned))

    def with_thresholds(self, values: Mapping[str, float]) -> LearnedScorer:
        """This scorer with those of its THRESHOLDS that `values` names set to them."""
        chosen = {k: v for k, v in values.items() if k in self.THRESHOLDS}
        return type(self)(dataclasses.replace(self.config, **chosen)) if chosen else self


class DuplicateKeys(Scorer):
    """Finds pairs that repeat others nearly: pairs sharing any of their keys are one
    group, in which the pair the split order and the smallest id favour stays."""

    REASON: ClassVar[str]

    @abstractmethod
    def keys(self, pairs: Pairs) -> np.ndarray:
        """(pairs, k) uint64: each pair's k keys; two pairs sharing one are duplicates."""


def min_pairs_option(kind: str) -> Any:
    """The option of the train pairs a learned scorer must learn from before it rejects
    (`learned_verdicts`)."""
    return count(
        5000,
        help=f"{kind}: reject only when learned from at least N train pairs (fewer: the "
        "scores are written, no pair rejected by them)",
    )


def learned_verdicts(
    reason: str,
    values: np.ndarray,
    rows: np.ndarray,
    learned: tuple[int, int],
    say: Callable[[float], str],
) -> list[Verdicts]:
    """A learned scorer's rejects: `rows` (their scores `values[rows]`, each said by
    `say`), when what it learned from, `learned` = (train pairs, the least it may reject
    from), is enough. Below, a score's tails are mostly the corpus's rare words, not its
    noise (the lexical score at its default threshold rejects 8.4% of 2,000 clean Tatoeba
    pairs, 3.8% of 8,000, 0.5% of 32,000); the scores are written all the same."""
    if learned[0] < learned[1]:
        rows = rows[:0]
    return [Verdicts(reason, rows, [say(v) for v in values[rows].tolist()])]


def finite_below(values: np.ndarray, limit: float) -> np.ndarray:
    """The rows whose score is known and below `limit` (NaN: no evidence, kept)."""
    return np.flatnonzero(np.nan_to_num(values, nan=np.inf) < limit)
