"""Thresholds read from the data: proposed from a score's histogram, or from trusted
pairs' scores (a share of them kept, at a bin's edge)."""

from __future__ import annotations

import numpy as np
import pytest

from nmtpipe.transforms.quality import thresholds
from nmtpipe.transforms.quality.judge import BIN, score_bins
from nmtpipe.transforms.quality.kinds.lexical import LexicalConfig, LexicalScorer

RNG = np.random.default_rng(0)
TRANSLATIONS, NOISE, TAIL = (
    RNG.normal(2.0, 0.7, 9000),
    RNG.normal(0, 0.45, 700),
    RNG.normal(4, 1, 300),
)


def test_noise_below_the_translations_is_cut_between_the_two_modes():
    """A crawled corpus: the translations' mode, the noise's as a shoulder below it (no
    valley between: Otsu's cut found none and proposed -1.31), an upper tail."""
    found = thresholds.propose("lexical", score_bins(np.concatenate([TRANSLATIONS, NOISE, TAIL])))
    assert found.method.startswith("between two modes")
    assert 0 < found.threshold < 2
    assert np.mean(found.threshold <= TRANSLATIONS) > 0.99
    assert np.mean(found.threshold <= NOISE) < 0.5


def test_one_mode_is_cut_by_its_robust_spread():
    values = np.concatenate([TRANSLATIONS, TAIL])
    found = thresholds.propose("lexical", score_bins(values))
    assert "one mode" in found.method
    median = np.median(values)
    mad = np.median(np.abs(values - median))
    assert abs(found.threshold - (median - 4 * 1.4826 * mad)) < 2 * BIN
    assert found.kept == values.size


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.99, 0.999])
def test_a_lower_limit_keeps_at_least_that_share_and_one_bin_less_would_not(keep):
    values = np.random.default_rng(0).normal(2.0, 1.0, 10_000)
    limit = thresholds.keeping("lexical", score_bins(values), keep)
    binned = np.rint(values / BIN) * BIN  # what the histogram knows of each value
    assert np.mean(binned >= limit) >= keep
    assert np.mean(binned >= limit + BIN) < keep


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.99])
def test_the_length_limit_is_on_either_side(keep):
    values = np.random.default_rng(1).normal(-0.5, 1.0, 10_000)
    limit = thresholds.keeping("length", score_bins(values), keep)
    binned = np.abs(np.rint(values / BIN) * BIN)
    assert np.mean(binned <= limit) >= keep
    assert np.mean(binned <= limit - BIN) < keep


def test_each_scorer_gets_its_own_option_and_a_score_no_pair_had_none():
    hists = {"lexical": {10: 1, 20: 99}, "length": {-60: 1, 0: 98, 60: 1}}
    found = thresholds.calibrated(hists, {"lexical": ("lexical",), "length": ("length",)}, 0.99)
    assert found == {"lexical": {"lexical_min": 0.975}, "length": {"length_max_deviation": 3.025}}
    assert thresholds.calibrated({}, {"lexical": ("lexical",)}, 0.99) == {}


def test_options_in_force_and_a_scorer_with_them():
    quality = {
        "scorers": ["rules", "lexical"],
        "lexical": {"lexical_min": 0.25, "lexical_bits": 21},
    }
    used = thresholds.in_force(quality, {"lexical": {"lexical_min": 0.6}})
    assert used["lexical"] == {"lexical_min": 0.6, "lexical_bits": 21}
    assert used["scorers"] == ["rules", "lexical"] and quality["lexical"]["lexical_min"] == 0.25
    scorer = LexicalScorer(LexicalConfig())
    assert scorer.with_thresholds({"lexical_min": 0.6, "length_max_deviation": 2}).config == (
        LexicalConfig(lexical_min=0.6)
    )
    assert scorer.with_thresholds({"lexical_bits": 19}) is scorer  # not a threshold
