"""Near-duplicates: one key for pairs equal but for punctuation, spacing and case, and
MinHash bands for pairs a few characters apart."""

from __future__ import annotations

import numpy as np

from nmtpipe.transforms.quality.base import Pairs
from nmtpipe.transforms.quality.kinds.neardup import (
    NearDupConfig,
    NearDupScorer,
    compared,
    near_keys,
    shingles,
)
from tests.helpers import example_lines, unicode_lines


def keys(src: list[str], tgt: list[str], **config) -> np.ndarray:
    config = {"neardup_bands": 8, **config}  # MinHash on (off by default: its cost)
    return NearDupScorer(NearDupConfig(**config)).keys(Pairs(src, tgt, ("en", "zh")))


def shares(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(set(a.tolist()) & set(b.tolist()))


def test_punctuation_spacing_and_case_give_the_same_first_key():
    found = keys(
        ["Are you coming tomorrow?", "ARE YOU COMING  TOMORROW", "Are you coming today?"],
        ["你明天来吗？", "你明天来吗", "你今天来吗？"],
    )
    assert found.shape == (3, 9)
    assert found[0, 0] == found[1, 0] != found[2, 0]
    assert compared(["A-b c."], ["你，好。"]) == ["abc\x00你好"]


def test_a_pair_a_few_characters_apart_shares_a_band_and_unrelated_pairs_do_not():
    base = (
        "The committee will publish its final report on the new railway line next month.",
        "委员会将于下个月发表关于新铁路线的最终报告。",
    )
    near = (
        "The committee will publish its final reports on the new railway line next month.",
        "委员会将于下个月发表关于新铁路线的最终报告。",
    )
    other = ("I bought three apples at the market this morning.", "我今天早上在市场买了三个苹果。")
    found = keys(*map(list, zip(base, near, other, strict=True)))
    assert found[0, 0] != found[1, 0] and shares(found[0, 1:], found[1, 1:])
    assert not shares(found[0], found[2])
    assert keys(list(base[:1]), list(base[1:]), neardup_bands=0).shape == (1, 1)


def test_short_pairs_are_compared_as_equal_or_not():
    # "Go away." and "Get away!" beside one translation: different sentences
    found = keys(["Go away.", "Get away!", "go away"], ["走開！", "走開！", "走開"])
    assert (found[:, 1:] == found[:, :1]).all()  # their bands: their exact key
    assert found[0, 0] == found[2, 0] != found[1, 0]


def test_short_texts_have_a_gram_and_grams_stay_in_their_text():
    grams = shingles(["ab", "", "abcdefg"])
    assert grams.lengths.tolist() == [2, 1, 7]
    again = shingles(["abcdefg"])
    assert np.array_equal(grams.values[3:], again.values)


def test_the_first_key_is_a_hash_of_the_compared_text():
    """Pairs share a first key exactly when `compared` makes them the same text: on the
    bundled corpus with its pairs again shouted, spaced and punctuated otherwise, and on
    lines of characters from every plane."""
    src, tgt = example_lines("tatoeba-cmn", "en")[:3000], example_lines("tatoeba-cmn", "zh")[:3000]
    src += [s.upper().replace(" ", "  -  ") for s in src[:500]] + unicode_lines(1000, 5)
    tgt += [t.replace("，", " ") + "!!" for t in tgt[:500]] + unicode_lines(1000, 6)
    texts = compared(src, tgt)
    found = near_keys(src, tgt)
    by_text = {}
    for text, key in zip(texts, found.tolist(), strict=True):
        assert by_text.setdefault(text, key) == key
    assert len(set(by_text.values())) == len(by_text) > 3000
