"""The length scorer: whether a pair's sides have the lengths its corpus's translations
have, by the distribution of their ratio learned from the corpus itself.

Lengths are characters weighted by script (a Han character counts three Latin letters,
`langid/scripts.py`), as the length-ratio filter counts them; the log of the target's
over the source's falls in a narrow band for translations (English-Chinese centred near
0 so counted). A pair's score is how many robust standard deviations (1.4826 x the
median absolute deviation, from a histogram: any order of merging gives the same) its
ratio lies from the median. Catches partial translations (half of a side missing is
about -0.7 in log ratio, 4 or more deviations on clean corpora), which the fixed
length-ratio limit lets through.
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
    learned_verdicts,
    min_pairs_option,
)
from nmtpipe.transforms.text.langid import scripts

BIN = 0.01  # histogram bins of the log ratio
SPAN = 6.0  # the histogram covers -SPAN .. SPAN; ratios beyond count in its end bins
_BINS = int(2 * SPAN / BIN) + 1


@dataclass(frozen=True)
class LengthConfig:
    length_max_deviation: float = option(
        4.0,
        metavar="Z",
        help="length: reject a pair whose log length ratio (characters weighted by script) "
        "lies more than Z robust standard deviations from the corpus's median: the lengths "
        "of a partial translation",
    )
    length_min_pairs: int = min_pairs_option("length")


def log_ratios(pairs: Pairs) -> np.ndarray:
    """log(target / source) of each pair's weighted lengths (NaN where a side is empty)."""
    sides = []
    for lines in (pairs.src, pairs.tgt):
        lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        sides.append(scripts.weighted_lengths(lengths, scripts.count(list(lines))))
    src, tgt = sides
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((src > 0) & (tgt > 0), np.log(tgt / src), np.nan)


def histogram(ratios: np.ndarray) -> np.ndarray:
    known = ratios[~np.isnan(ratios)]
    bins = np.clip(np.rint((known + SPAN) / BIN), 0, _BINS - 1).astype(np.int64)
    return np.bincount(bins, minlength=_BINS).astype(np.int64)


def centre_and_spread(hist: np.ndarray) -> tuple[float, float]:
    """The median log ratio and 1.4826 x the median absolute deviation, by bins."""
    centres = np.arange(hist.size) * BIN - SPAN
    median = _weighted_median(centres, hist)
    deviation = np.abs(centres - median)
    order = np.argsort(deviation, kind="stable")
    mad = _weighted_median(deviation[order], hist[order])
    return median, max(1.4826 * mad, BIN)


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The smallest value at which half the weight is reached (values sorted)."""
    total = int(weights.sum())
    if total == 0:
        return 0.0
    return float(values[int(np.searchsorted(np.cumsum(weights), (total + 1) // 2))])


class LengthScorer(LearnedScorer):
    NAME = "length"
    Config = LengthConfig
    COLUMNS = ("length",)
    REASONS = ("length",)
    PASSES = 1
    THRESHOLDS = ("length_max_deviation", "length_min_pairs")
    CATCHES = "partial translations: a side much shorter than the corpus's translations make it"
    COSTS = (
        "one pass over the train pairs (at most --learn-pairs of them) and one over all to "
        "score; a histogram of 1,201 counts"
    )

    def start(self, pass_: int) -> Any:
        return np.zeros(_BINS, dtype=np.int64)

    def gather(self, pass_: int, learned: list[Any], acc: Any, pairs: Pairs) -> None:
        acc += histogram(log_ratios(pairs))

    def merge(self, acc: Any, other: Any) -> Any:
        return acc + other

    def score(self, learned: list[Any], pairs: Pairs) -> dict[str, np.ndarray]:
        median, spread = centre_and_spread(learned[0])
        return {"length": ((log_ratios(pairs) - median) / spread).astype(np.float32)}

    def learned_pairs(self, learned: list[Any]) -> int:
        return int(learned[0].sum())

    def verdicts(self, scores: dict[str, np.ndarray], learned_pairs: int) -> list[Verdicts]:
        limit, z = self.config.length_max_deviation, scores["length"]
        return learned_verdicts(
            "length",
            z,
            np.flatnonzero(np.abs(np.nan_to_num(z)) > limit),
            (learned_pairs, self.config.length_min_pairs),
            lambda s: (
                f"{'the target' if s < 0 else 'the source'} is short for a translation: "
                f"length {s:+.1f} deviations (more than {limit:g})"
            ),
        )
