"""Thresholds read from the data: for each score, a threshold proposed from the
histogram of every pair's score (`judge.py`'s bins), and each scorer's own.

A clean corpus gives one mode, with a tail of a few unusual translations; a crawled one
gives two, the translations' and the noise's. Otsu's method (1979) finds the cut that
best separates two classes of a histogram; the proposal is that cut where the two
classes are clearly apart (the share of the variance between them, eta, at least
EVIDENT) and the lower class is a real mode (at least MIN_SHARE of the pairs), and
otherwise the robust cut median - SPREAD x 1.4826 x MAD, which on a clean corpus keeps
all but its farthest tail. The length score, already in robust deviations from the
median, is judged on its absolute value, by the robust cut only.

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

EVIDENT = 0.6
MIN_SHARE = 0.02
SPREAD = 4.0
# Scores these methods do not fit, proposed nothing: the model score (`models/dcce.py`),
# exp(-cross-entropies), spreads over orders of magnitude near 0 (half of a noisy
# corpus scored by small seed models in the first bin, Otsu's cut then at 0.18 keeping
# a tenth of it: benchmarks/RESULTS.md); its threshold is chosen by its user.
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


def otsu(values: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """(the cut between two classes of a histogram, eta: the share of its variance that
    lies between them)."""
    total = counts.sum()
    mean = float((values * counts).sum() / total)
    variance = float((counts * (values - mean) ** 2).sum() / total)
    w = np.cumsum(counts)[:-1] / total
    mu = np.cumsum(values * counts)[:-1] / total
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mean * w - mu) ** 2 / (w * (1 - w))
    between = np.nan_to_num(between)
    if between.size == 0 or variance == 0:
        return float(values[0]), 0.0
    k = int(np.argmax(between))
    return float((values[k] + values[k + 1]) / 2), float(between[k] / variance)


def propose(column: str, hist: Mapping[int | str, int]) -> Proposal | None:
    """The threshold proposed for score `column` from the histogram of all pairs'
    scores (None: no pair scored, or a score of NOT_PROPOSED)."""
    values, counts = _values(hist)
    if counts.sum() == 0 or column in NOT_PROPOSED:
        return None
    if column == "length":  # two-sided: judged on |z|, larger is worse
        values, counts = _fold(values, counts)
        values = -values
    cut, eta = otsu(values, counts)
    below = counts[values < cut].sum() / counts.sum()
    # |z| of the length score is already in robust deviations, and one-sided (half of
    # a normal): two classes of it would only split its tail
    if eta >= EVIDENT and below >= MIN_SHARE and column != "length":
        threshold, method = cut, f"Otsu's cut (eta {eta:.2f}, {below:.0%} below)"
    else:
        median = _quantile(values, counts, 0.5)
        mad = _quantile(
            np.abs(values - median), counts, 0.5, order=np.argsort(np.abs(values - median))
        )
        threshold = median - SPREAD * 1.4826 * mad
        method = f"median - {SPREAD:g} x 1.4826 x MAD (one mode: eta {eta:.2f})"
    kept = int(counts[values >= threshold].sum())
    shown = -threshold if column == "length" else threshold
    return Proposal(round(shown, 2), method, kept, int(counts.sum()))


def _fold(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    folded: dict[float, float] = {}
    for v, c in zip(np.round(np.abs(values), 6).tolist(), counts.tolist(), strict=True):
        folded[v] = folded.get(v, 0) + c
    keys = sorted(folded)
    return np.array(keys), np.array([folded[k] for k in keys])


def _quantile(
    values: np.ndarray, counts: np.ndarray, q: float, order: np.ndarray | None = None
) -> float:
    order = np.argsort(values, kind="stable") if order is None else order
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
