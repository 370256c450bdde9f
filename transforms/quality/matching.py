"""The scores of pairs outside the learned sample, matched to those of pairs inside it.

Past `--learn-pairs`, a learned scorer scores a pair of its sample leave-one-out and a
pair outside it by tables it added nothing to (`base.py`). The two are not the same:
leave-one-out takes back a pair's last counts, not what its earlier counts did to the
other pairs', so a clean pair of the sample scores higher than it would outside it, and
one threshold judged the pairs outside more harshly (`lexical` on the noisy corpus of
`benchmarks/corpora/make_pair_noise.py`, learning from 6,000 pairs: 1.5% of the clean
pairs inside rejected, 3.5% outside).

The sample is a random draw of the corpus (a pair's id is a keyed hash), so both groups
hold one distribution of true scores, and what differs is the scoring. Each score of a
pair outside is therefore mapped to the score a pair inside has at the same quantile
(quantile matching), both quantile functions read from histograms of a subset of each
group scored once the tables are learned (about CALIBRATION_PAIRS each). A threshold
then takes the same share of both groups, and the score columns are on one scale for
the report and `nmtpipe rethreshold`. A scorer whose leave-one-out is exact (`fluency`
takes back all its counts of the line) needs none; those that do say so
(`LearnedScorer.MATCH_OUTSIDE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from nmtpipe.transforms.quality.base import LEARN_ALL
from nmtpipe.transforms.quality.judge import BIN

CALIBRATION_PAIRS = 50_000  # pairs of each group scored for its histograms
KNOTS = 2_001  # quantiles the map interpolates between (0.05% apart)


def calibration_ids(limit: int, wanted: int) -> tuple[range, range]:
    """The id ranges of the pairs scored for each group's histogram (inside, outside
    the sample below `limit`, which holds about `wanted` pairs): ranges as wide, so
    about as many pairs, at most CALIBRATION_PAIRS each."""
    width = limit if wanted <= CALIBRATION_PAIRS else limit * CALIBRATION_PAIRS // wanted
    return range(0, width), range(limit, min(limit + width, LEARN_ALL))


@dataclass(frozen=True)
class QuantileMap:
    """A monotone map of scores outside the sample onto those inside it: `outside[k]`
    goes to `inside[k]`, linear between knots and shifted alike beyond the ends."""

    outside: np.ndarray
    inside: np.ndarray

    def __call__(self, values: np.ndarray) -> np.ndarray:
        mapped = np.interp(values, self.outside, self.inside)
        below, above = values < self.outside[0], values > self.outside[-1]
        mapped[below] = values[below] - self.outside[0] + self.inside[0]
        mapped[above] = values[above] - self.outside[-1] + self.inside[-1]
        return mapped.astype(values.dtype)


def quantiles(hist: Mapping[int, int], probabilities: np.ndarray) -> np.ndarray:
    """The scores at `probabilities` of a histogram of bins of BIN (`judge.score_bins`),
    each bin's pairs spread evenly over it."""
    bins = np.array(sorted(hist), dtype=np.int64)
    counts = np.array([hist[b] for b in bins.tolist()], dtype=np.float64)
    cumulative = np.cumsum(counts) / counts.sum()
    at = np.minimum(np.searchsorted(cumulative, probabilities, side="left"), bins.size - 1)
    before = np.where(at > 0, cumulative[at - 1], 0.0)
    within = (probabilities - before) / (counts[at] / counts.sum())
    return (bins[at] - 0.5 + np.clip(within, 0.0, 1.0)) * BIN


def quantile_maps(
    hists: Mapping[str, Mapping[str, Mapping[int, int]]],
) -> dict[str, QuantileMap]:
    """{column: its map}, from {"inside": {column: hist}, "outside": {column: hist}}; a
    column with no score in either group keeps its scores."""
    probabilities = (np.arange(KNOTS) + 0.5) / KNOTS
    inside, outside = hists.get("inside", {}), hists.get("outside", {})
    return {
        column: QuantileMap(*(quantiles(h[column], probabilities) for h in (outside, inside)))
        for column in inside
        if inside[column] and outside.get(column)
    }
