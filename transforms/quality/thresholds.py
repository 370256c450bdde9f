"""Thresholds read from the data: for each score, a threshold proposed from the
histogram of every pair's score (`judge.py`'s bins), and each scorer's own.

A clean corpus gives one mode, with a tail of a few unusual translations; a crawled one
gives two, the translations' and the noise's below it, often beside a long upper tail.
The histogram is fitted by a mixture of three normal components (EM, started from its
median and spread): the translations' (the largest), one below and one above it. Where
the one below is a real mode (at least MIN_SHARE of the pairs) and clearly apart from
the translations' (Ashman's D at least APART), the proposal is where the two are equally
likely; otherwise the robust cut median - SPREAD x 1.4826 x MAD, which on a clean corpus
keeps all but its farthest tail. Two components would spend the second on the upper
tail; Otsu's cut, which this replaced, needs a valley between two classes, and where the
noise is a shoulder under the translations' mode it found none (the noisy corpus of
benchmarks/RESULTS.md: -1.3 proposed) or split the translations' own mode (NTREX-128: a
cut keeping a fifth). The length score, already in robust deviations from the median, is
judged on its absolute value, by the robust cut only.

Where trusted pairs are given (`prepare --trustedpref`), their histograms set the
thresholds instead (`keeping`, `calibrated`): their pairs are translations, so a share
of them kept puts each cut where clean text of the corpus's kind ends, which a crawled
corpus's own histogram, half noise, cannot show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from nmtpipe.transforms.quality.judge import BIN

MIN_SHARE = 0.02
APART = 2.0  # Ashman's D: two normal components this far apart have a valley between them
SPREAD = 4.0
EM_STEPS = 300
# Scores these methods do not fit, proposed nothing: the model score (`models/dcce.py`),
# exp(-cross-entropies), spreads over orders of magnitude near 0 (half of a noisy
# corpus scored by small seed models in the first bin, where Otsu's cut, proposed
# before the mixture, kept a tenth of it: benchmarks/RESULTS.md); its threshold is
# chosen by its user.
NOT_PROPOSED = frozenset({"dcce"})


@dataclass(frozen=True)
class Proposal:
    """A proposed threshold (a lower limit; for `length`, an upper limit of |score|),
    how it was found, and the pairs it would keep."""

    threshold: float
    method: str
    kept: int
    total: int


def _values(hist: Mapping[int | str, int]) -> tuple[np.ndarray, np.ndarray]:
    items = sorted((int(k), int(v)) for k, v in hist.items())
    return (
        np.array([k for k, _ in items], dtype=np.float64) * BIN,
        np.array([v for _, v in items], dtype=np.float64),
    )


@dataclass(frozen=True)
class Mixture:
    """Normal components fitted to a histogram: their means, spreads and shares."""

    means: np.ndarray
    spreads: np.ndarray
    shares: np.ndarray

    def noise(self) -> tuple[float, float, float] | None:
        """(where the translations' component and the one below it are equally likely,
        the share of that lower one, Ashman's D between them); None where no component
        lies below the largest."""
        main = int(np.argmax(self.shares))
        low = int(np.argmin(self.means))
        if low == main:
            return None
        mu, sd, pi = self.means[[main, low]], self.spreads[[main, low]], self.shares[[main, low]]
        apart = float(np.sqrt(2) * (mu[0] - mu[1]) / np.sqrt((sd**2).sum()))
        xs = np.linspace(mu[1], mu[0], 2001)
        log_odds = (
            np.log(pi[0] / sd[0]) - 0.5 * ((xs - mu[0]) / sd[0]) ** 2
            - np.log(pi[1] / sd[1]) + 0.5 * ((xs - mu[1]) / sd[1]) ** 2
        )  # fmt: skip
        return float(xs[np.argmin(np.abs(log_odds))]), float(pi[1]), apart


def mixture(values: np.ndarray, counts: np.ndarray, median: float, spread: float) -> Mixture:
    """Three normal components fitted to a histogram by EM, started at its `median` and 3
    robust spreads (`_robust`) either side of it, each that wide; a component never
    narrower than a bin."""
    weights = counts / counts.sum()
    start = spread + BIN
    means = median + start * np.array([0.0, -3.0, 3.0])
    spreads, shares = np.full(3, start), np.array([0.8, 0.1, 0.1])
    for _ in range(EM_STEPS):
        density = (
            shares[:, None]
            * np.exp(-0.5 * ((values[None] - means[:, None]) / spreads[:, None]) ** 2)
            / spreads[:, None]
        )
        owned = weights * density / np.maximum(density.sum(axis=0), 1e-300)
        shares = np.maximum(owned.sum(axis=1), 1e-12)
        means = (owned * values).sum(axis=1) / shares
        spreads = np.sqrt((owned * (values - means[:, None]) ** 2).sum(axis=1) / shares) + BIN
    return Mixture(means, spreads, shares)


def propose(column: str, hist: Mapping[int | str, int]) -> Proposal | None:
    """The threshold proposed for score `column` from the histogram of all pairs'
    scores (None: no pair scored, or a score of NOT_PROPOSED)."""
    values, counts = _values(hist)
    if counts.sum() == 0 or column in NOT_PROPOSED:
        return None
    if column == "length":  # two-sided: judged on |z|, larger is worse
        values, counts = _fold(values, counts)
        values = -values
    median, spread = _robust(values, counts)
    # |z| of the length score is already in robust deviations, and one-sided (half of
    # a normal): a component below its mode would only split its tail
    noise = None if column == "length" else mixture(values, counts, median, spread).noise()
    if noise is not None and noise[1] >= MIN_SHARE and noise[2] >= APART:
        threshold, share, apart = noise
        method = f"between two modes ({share:.0%} of the pairs below, D {apart:.1f})"
    else:
        threshold = median - SPREAD * spread
        method = f"median - {SPREAD:g} x 1.4826 x MAD (one mode)"
    kept = int(counts[values >= threshold].sum())
    shown = -threshold if column == "length" else threshold
    return Proposal(round(shown, 2), method, kept, int(counts.sum()))


def _fold(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    folded: dict[float, float] = {}
    for v, c in zip(np.round(np.abs(values), 6).tolist(), counts.tolist(), strict=True):
        folded[v] = folded.get(v, 0) + c
    keys = sorted(folded)
    return np.array(keys), np.array([folded[k] for k in keys])


def _robust(values: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """A histogram's median and robust standard deviation (1.4826 x the median absolute
    deviation)."""
    median = _quantile(values, counts, 0.5)
    return median, 1.4826 * _quantile(np.abs(values - median), counts, 0.5)


def _quantile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(counts[order])
    return float(values[order][int(np.searchsorted(cumulative, q * cumulative[-1]))])


def keeping(column: str, hist: Mapping[int | str, int], keep: float) -> float | None:
    """The threshold of score `column` that keeps at least `keep` of the pairs whose
    scores `hist` holds, at a bin's edge (for length, the limit of |score|; None: no
    pair scored)."""
    values, counts = _values(hist)
    if counts.sum() == 0:
        return None
    if column == "length":
        values, counts = _fold(values, counts)
        at = int(np.searchsorted(np.cumsum(counts), keep * counts.sum()))
        return round(float(values[min(at, values.size - 1)]) + BIN / 2, 4)
    at = int(np.searchsorted(np.cumsum(counts), (1 - keep) * counts.sum(), side="right"))
    return round(float(values[min(at, values.size - 1)]) - BIN / 2, 4)


def calibrated(
    hists: Mapping[str, Mapping[int | str, int]], owners: Mapping[str, tuple[str, ...]], keep: float
) -> dict[str, dict[str, float]]:
    """{scorer: {threshold option: value}}: each score's threshold where `keep` of the
    trusted pairs (their scores' `hists`) are kept; `owners`: each scorer's columns."""
    found: dict[str, dict[str, float]] = {}
    for name, columns in owners.items():
        for column in columns:
            value = keeping(column, hists.get(column, {}), keep)
            if value is not None:
                found.setdefault(name, {})[threshold_option(column)] = value
    return found


def in_force(
    quality: Mapping[str, Mapping[str, float]], calibrated: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """The scorers' options as they judged: a prepared dataset's (its manifest's
    `quality`), with the thresholds that its trusted pairs set (its stats' `calibrated`)."""
    return {
        name: {**value, **calibrated.get(name, {})} if isinstance(value, Mapping) else value
        for name, value in quality.items()
    }


def threshold_of(quality: Mapping[str, Mapping[str, float]], column: str) -> float | None:
    """The threshold a prepared dataset's options (its manifest's `quality`) set for the
    built-in score `column`: its scorer's `<column>_min`, or for length its maximum
    deviation (None for any other)."""
    return quality.get(column, {}).get(threshold_option(column))


def threshold_option(column: str) -> str:
    """The option that sets the threshold of the built-in score `column`."""
    return "length_max_deviation" if column == "length" else f"{column}_min"
