"""The length and fluency scorers: a side's length and its order of characters, judged
against what the corpus's own pairs have."""

from __future__ import annotations

import random

import numpy as np

from nmtpipe.transforms.quality.base import Pairs
from nmtpipe.transforms.quality.kinds.fluency import FluencyConfig, FluencyScorer
from nmtpipe.transforms.quality.kinds.length import (
    LengthConfig,
    LengthScorer,
    centre_and_spread,
    histogram,
)
from tests.helpers import example_lines
from tests.transforms.quality.test_lexical import learn

EN_ALL, ZH_ALL = example_lines("tatoeba-cmn", "en"), example_lines("tatoeba-cmn", "zh")
EN, ZH = EN_ALL[:3000], ZH_ALL[:3000]


def test_a_side_cut_in_half_lies_far_from_the_corpus_s_lengths():
    pairs = Pairs(EN, ZH, ("en", "zh"))
    scorer = LengthScorer(LengthConfig(length_min_pairs=len(EN)))
    z = scorer.score(learn(scorer, [pairs]), pairs)["length"]
    assert np.mean(np.abs(z) <= 4) > 0.99
    whole = [(s, t) for s, t in zip(EN_ALL, ZH_ALL, strict=True) if len(s) >= 30][:200]
    cut_short = Pairs([s for s, _ in whole], [t[: len(t) // 3] for _, t in whole], ("en", "zh"))
    cut = scorer.score(learn(scorer, [pairs]), cut_short)["length"]
    assert np.mean(cut < -4) > 0.9
    rows = scorer.judge({"length": cut}, cut_short, learn(scorer, [pairs]))[0]
    assert rows.reason == "length" and "the target is short" in rows.details[0]


def test_a_long_half_sentence_lies_farther_out_than_a_short_one():
    """The deviation is scaled by the square root of the pair's length (Gale and
    Church): a long pair's ratio varies less, so the same cut says more."""
    scorer = LengthScorer(LengthConfig())
    found = learn(scorer, [Pairs(EN_ALL, ZH_ALL, ("en", "zh"))])
    by_length = sorted(zip(EN_ALL, ZH_ALL, strict=True), key=lambda pair: len(pair[0]))
    short, long = (
        scorer.score(
            found, Pairs([s for s, _ in part], [t[: len(t) // 2] for _, t in part], ("en", "zh"))
        )["length"]
        for part in (by_length[:300], by_length[-300:])
    )
    assert np.median(long) < np.median(short) - 3
    assert np.mean(long < -4) > 0.75 > 0.1 > np.mean(short < -4)


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
    scores = scorer.score(learn(scorer, [mixed]), mixed)["fluency"]
    natural, garbled = scores[: len(pairs)], scores[len(pairs) :]
    assert np.median(natural) > 0.3 > -0.5 > np.median(garbled)
    assert np.mean(garbled < -1) > 0.5 > 0.05 > np.mean(natural < -1)
    unseen = Pairs(["\u16a0\u16a2"], ["\u2f00\u2f01"], ("en", "zh"))  # runes, radicals
    assert np.isnan(scorer.score(learn(scorer, [mixed]), unseen)["fluency"][0])  # no evidence
