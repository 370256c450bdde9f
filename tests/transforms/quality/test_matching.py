"""Scores outside the learned sample matched to those inside it: which pairs are scored
for each group's histogram, the quantiles read from a histogram, and the map."""

from __future__ import annotations

import numpy as np

from nmtpipe.transforms.quality.base import LEARN_ALL
from nmtpipe.transforms.quality.judge import score_bins
from nmtpipe.transforms.quality.matching import (
    CALIBRATION_PAIRS,
    calibration_ids,
    quantile_maps,
    quantiles,
)


def test_each_group_is_scored_on_ranges_as_wide_at_most_the_calibration_pairs():
    limit = LEARN_ALL // 10  # a sample of a tenth of the corpus
    inside, outside = calibration_ids(limit, 500_000)
    assert inside.start == 0 and outside.start == limit and len(inside) == len(outside)
    assert len(inside) == limit * CALIBRATION_PAIRS // 500_000  # a tenth of the sample
    small = calibration_ids(limit, 20_000)  # a sample under the bound: all of it
    assert len(small[0]) == len(small[1]) == limit
    near_the_end = calibration_ids(LEARN_ALL // 10 * 9, 20_000)[1]
    assert near_the_end.stop == LEARN_ALL  # the rest of the corpus, ids never past the range


def test_quantiles_spread_each_bins_pairs_evenly_over_it():
    hist = {0: 50, 2: 50}  # bins near 0.0 and 0.1, each 0.05 wide
    found = quantiles(hist, np.array([0.0, 0.25, 0.5, 0.75, 1.0]))
    assert np.allclose(found, [-0.025, 0.0, 0.025, 0.1, 0.125])


def test_a_map_moves_the_outside_scores_onto_the_inside_ones_quantile_for_quantile():
    rng = np.random.default_rng(0)
    inside, outside = rng.normal(1.5, 0.6, 40_000), rng.normal(1.2, 0.8, 40_000)
    hists = {g: {"lexical": score_bins(v)} for g, v in (("inside", inside), ("outside", outside))}
    match = quantile_maps(hists)["lexical"]
    mapped = match(outside)
    for q in (0.01, 0.05, 0.5, 0.95):
        assert abs(np.quantile(mapped, q) - np.quantile(inside, q)) < 0.03
    # A threshold then takes the same share of both groups.
    assert abs(np.mean(mapped < 0.25) - np.mean(inside < 0.25)) < 0.003
    assert np.all(np.diff(match(np.sort(outside))) >= 0)  # the order of the pairs kept

    beyond = match(np.array([-30.0, np.nan, 30.0]))
    assert beyond[0] == -30.0 - match.outside[0] + match.inside[0]  # shifted, not clipped
    assert np.isnan(beyond[1]) and beyond[2] > match.inside[-1]


def test_a_score_missing_from_either_group_is_left_as_it_is():
    hists = {"inside": {"lexical": {10: 5}, "other": {10: 5}}, "outside": {"lexical": {12: 5}}}
    assert set(quantile_maps(hists)) == {"lexical"}
    assert quantile_maps({}) == {}
