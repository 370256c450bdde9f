"""The length and fluency scorers: a side's length and its order of characters, judged
against what the corpus's own pairs have."""

from __future__ import annotations

import random

import numpy as np

from nmtpipe.transforms.quality.base import Pairs
from nmtpipe.transforms.quality.fluency import FluencyConfig, FluencyScorer
from nmtpipe.transforms.quality.length import (
    LengthConfig,
    LengthScorer,
    centre_and_spread,
    histogram,
)
from tests.helpers import example_lines

EN_ALL, ZH_ALL = example_lines("tatoeba-cmn", "en"), example_lines("tatoeba-cmn", "zh")
EN, ZH = EN_ALL[:3000], ZH_ALL[:3000]


def learned(scorer, pairs: Pairs) -> list:
    acc = scorer.start(1)
    scorer.gather(1, [], acc, pairs)
    return [acc]


def test_a_side_cut_in_half_lies_far_from_the_corpus_s_lengths():
    pairs = Pairs(EN, ZH, ("en", "zh"))
    scorer = LengthScorer(LengthConfig(length_min_pairs=len(EN)))
    z = scorer.score(learned(scorer, pairs), pairs)["length"]
    assert np.mean(np.abs(z) <= 4) > 0.99
    halves = Pairs(EN[:200], [t[: max(1, len(t) // 3)] for t in ZH[:200]], ("en", "zh"))
    cut = scorer.score(learned(scorer, pairs), halves)["length"]
    assert np.mean(cut < -3) > 0.6 and np.mean(cut < -4) > 0.3  # short lines vary most
    rows = scorer.judge({"length": cut}, halves, learned(scorer, pairs))[0]
    assert rows.reason == "length" and "the target is short" in rows.details[0]


def test_the_median_and_spread_of_a_histogram():
    ratios = np.array([0.0, 0.1, -0.1, 0.2, np.nan])
    median, spread = centre_and_spread(histogram(ratios))
    assert abs(median - 0.0) < 0.011 and abs(spread - 1.4826 * 0.1) < 0.02


def test_shuffled_characters_read_less_like_the_language_than_its_sentences():
    """Scored as learned: the shuffled lines are part of the corpus, their own counts
    taken back out (leave-one-out)."""
    rng = random.Random(0)
    long = [(s, t) for s, t in zip(EN_ALL, ZH_ALL, strict=True) if len(t) >= 10]
    shuffled = [(s, "".join(rng.sample(t, len(t)))) for s, t in long[:200]]
    pairs = Pairs(*map(list, zip(*long[200:], *[], strict=True)), ("en", "zh"))
    mixed = Pairs(
        [s for s, _ in long[200:] + shuffled], [t for _, t in long[200:] + shuffled], ("en", "zh")
    )
    scorer = FluencyScorer(FluencyConfig())
    scores = scorer.score(learned(scorer, mixed), mixed)["fluency"]
    natural, garbled = scores[: len(pairs)], scores[len(pairs) :]
    assert np.median(natural) > 0.3 > -0.5 > np.median(garbled)
    assert np.mean(garbled < -1) > 0.5 > 0.05 > np.mean(natural < -1)
    unseen = Pairs(["\u16a0\u16a2"], ["\u2f00\u2f01"], ("en", "zh"))  # runes, radicals
    assert np.isnan(scorer.score(learned(scorer, mixed), unseen)["fluency"][0])  # no evidence
