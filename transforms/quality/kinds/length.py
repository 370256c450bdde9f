"""The length scorer: whether a pair's sides have the lengths its corpus's translations
have, by the distribution of their ratio learned from the corpus itself.

Lengths are characters weighted by script (a Han character counts three Latin letters,
`langid/scripts.py`), as the length-ratio filter counts them; the log of the target's
over the source's falls in a narrow band for translations (English-Chinese centred near
0 so counted), the narrower the longer the pair: the ratio of two long sides averages
over more words. So, as Gale and Church's sentence aligner (1993) scales a length
difference by the square root of the length, a pair's deviation is its log ratio's
distance from the corpus's median times the square root of its two sides' length, and
its score is how many robust standard deviations (1.4826 x the median absolute
deviation) of the corpus's deviations that is. Both medians come from histograms (pass
1 of the ratios, pass 2 of the deviations): any order of merging gives the same.
Catches partial translations (half of a side missing is about -0.7 in log ratio), which
the fixed length-ratio limit lets through; scaled by length, a long half sentence stands
out where a short line's natural spread hid it (benchmarks/RESULTS.md, "Lengths scaled").
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

BIN = 0.01  # histogram bins of the log ratio and of the deviations
SPAN = 6.0  # the ratios' histogram covers -SPAN .. SPAN; beyond, they count in its end bins
# The deviations' covers ten times that: a ratio's spread times the square root of a
# length (a Han character counts 3), about 1.5 for Tatoeba's pairs and more for longer.
DEVIATION_SPAN = 60.0


@dataclass(frozen=True)
class LengthConfig:
    length_max_deviation: float = option(
        4.0,
        metavar="Z",
        help="length: reject a pair whose log length ratio (characters weighted by script) "
        "lies more than Z robust standard deviations from the corpus's median, its distance "
        "scaled by the square root of the pair's length (Gale and Church): the lengths of a "
        "partial translation",
    )
    length_min_pairs: int = min_pairs_option("length")


def log_ratios(pairs: Pairs) -> tuple[np.ndarray, np.ndarray]:
    """log(target / source) of each pair's weighted lengths (NaN where a side is empty),
    and the sum of the two lengths."""
    sides = []
    for lines in (pairs.src, pairs.tgt):
        lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        sides.append(scripts.weighted_lengths(lengths, scripts.count(list(lines))))
    src, tgt = sides
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((src > 0) & (tgt > 0), np.log(tgt / src), np.nan), src + tgt


def deviations(pairs: Pairs, median: float) -> np.ndarray:
    """Each pair's log ratio less the corpus's `median`, times the square root of its
    length (Gale and Church's scaling)."""
    ratios, lengths = log_ratios(pairs)
    return (ratios - median) * np.sqrt(lengths)


def histogram(values: np.ndarray, span: float = SPAN) -> np.ndarray:
    """Counts of the known `values` in bins of BIN from -span to span (the ends holding
    what lies beyond)."""
    known = values[~np.isnan(values)]
    size = round(2 * span / BIN) + 1
    bins = np.clip(np.rint((known + span) / BIN), 0, size - 1).astype(np.int64)
    return np.bincount(bins, minlength=size).astype(np.int64)


def centre_and_spread(hist: np.ndarray) -> tuple[float, float]:
    """The median and 1.4826 x the median absolute deviation of a `histogram`'s values, by
    bins."""
    centres = np.arange(hist.size) * BIN - (hist.size - 1) * BIN / 2
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
    PASSES = 2
    THRESHOLDS = ("length_max_deviation", "length_min_pairs")
    CATCHES = "partial translations: a side much shorter than the corpus's translations make it"
    COSTS = (
        "two passes over the train pairs (at most --learn-pairs of them; the ratios' median, "
        "then the deviations' spread) and one over all to score; histograms of 1,201 and "
        "12,001 counts"
    )

    def start(self, pass_: int) -> Any:
        return histogram(np.zeros(0), SPAN if pass_ == 1 else DEVIATION_SPAN)

    def gather(self, pass_: int, learned: list[Any], acc: Any, pairs: Pairs) -> None:
        if pass_ == 1:
            acc += histogram(log_ratios(pairs)[0])
        else:
            median = centre_and_spread(learned[0])[0]
            acc += histogram(deviations(pairs, median), DEVIATION_SPAN)

    def merge(self, acc: Any, other: Any) -> Any:
        return acc + other

    def score(self, learned: list[Any], pairs: Pairs) -> dict[str, np.ndarray]:
        found = deviations(pairs, centre_and_spread(learned[0])[0])
        median, spread = centre_and_spread(learned[1])
        return {"length": ((found - median) / spread).astype(np.float32)}

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
