"""The lexical scorer: Model 1 in both directions, learned in two passes of fixed-size
tables, scoring pairs leave-one-out."""

from __future__ import annotations

import random

import numpy as np

from nmtpipe.transforms.quality.base import LearnedScorer, Pairs
from nmtpipe.transforms.quality.kinds.lexical import LexicalConfig, LexicalScorer

WORDS = [
    "cat", "dog", "bird", "fish", "tree", "house", "river",
    "moon", "sun", "rain", "book", "door", "apple", "milk",
]  # fmt: skip
CHARS = "猫狗鸟鱼树房河月日雨书门果奶"


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Sentences of 2 to 5 words and their word-by-word translations, shuffled."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        picked = rng.sample(range(len(WORDS)), rng.randint(2, 5))
        src.append(" ".join(WORDS[k] for k in picked))
        tgt.append("".join(CHARS[k] for k in rng.sample(picked, len(picked))))
    return src, tgt


def learn(scorer: LearnedScorer, batches: list[Pairs]) -> list:
    """What each of the scorer's passes learns from `batches`, merged as Beam would."""
    learned = []
    for pass_ in range(1, scorer.PASSES + 1):
        merged = None
        for batch in batches:
            acc = scorer.start(pass_)
            scorer.gather(pass_, learned, acc, batch)
            merged = acc if merged is None else scorer.merge(merged, acc)
        learned.append(merged)
    return learned


def test_translations_score_above_pairs_of_other_sentences_and_the_threshold_splits_them():
    src, tgt = corpus(600)
    scorer = LexicalScorer(LexicalConfig())
    pairs = Pairs(src, tgt, ("en", "zh"))
    learned = learn(scorer, [pairs])
    good = scorer.score(learned, pairs)["lexical"]
    swapped = Pairs(src[:100], tgt[100:200], ("en", "zh"))
    bad = scorer.score(learned, swapped)["lexical"]
    assert good.dtype == np.float32
    # about 0.85 and -0.3: sentences of a 14-word language share words by chance
    assert np.median(good) > 0.5 and np.median(bad) < 0
    three = {"lexical": np.array([3.0, -2.0, np.nan], np.float32)}
    # learned from 600 pairs: too few to reject by default, enough where the user says so
    assert scorer.judge(three, pairs, learned)[0].rows.size == 0
    trusting = LexicalScorer(LexicalConfig(lexical_min_pairs=600))
    verdicts = trusting.judge(three, pairs, learned)
    assert verdicts[0].reason == "lexical" and verdicts[0].rows.tolist() == [1]
    assert "lexical -2.00 < 0" in verdicts[0].details[0]


def test_a_pair_of_words_seen_nowhere_else_is_no_evidence_not_a_translation():
    """Leave-one-out: a pair's own counts are taken back, so words it alone holds say
    nothing (NaN, kept), where they would otherwise explain each other perfectly."""
    src, tgt = corpus(300)
    src.append("zebra quokka")
    tgt.append("斑马袋鼠")
    scorer = LexicalScorer(LexicalConfig(lexical_min_pairs=1))
    pairs = Pairs(src, tgt, ("en", "zh"))
    learned = learn(scorer, [pairs])
    scores = scorer.score(learned, pairs)["lexical"]
    assert np.isnan(scores[-1])
    assert scorer.judge({"lexical": scores}, pairs, learned)[0].rows.size <= 6


def test_any_order_of_batches_learns_the_same_tables_and_scores():
    src, tgt = corpus(400, seed=1)
    parts = [Pairs(src[k::3], tgt[k::3], ("en", "zh")) for k in range(3)]
    scorer = LexicalScorer(LexicalConfig())
    one, other = learn(scorer, parts), learn(scorer, parts[::-1])
    assert all(
        np.array_equal(a.counts, b.counts)
        for a, b in zip(
            one[0].units + [t for d in one[0].directions for t in (d.links, d.totals)],
            other[0].units + [t for d in other[0].directions for t in (d.links, d.totals)],
            strict=True,
        )
    )
    whole = Pairs(src, tgt, ("en", "zh"))
    assert np.array_equal(
        scorer.score(one, whole)["lexical"], scorer.score(other, whole)["lexical"]
    )
