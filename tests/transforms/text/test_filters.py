"""Pair filters: each reason, its detail, and which check wins."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from nmtpipe.transforms.text.filters import (
    COPY,
    EMPTY,
    LENGTH_RATIO,
    TOO_LONG,
    FilterConfig,
)
from nmtpipe.transforms.text.filters import check_pairs as check_sides
from nmtpipe.transforms.text.langid import scripts
from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer
from nmtpipe.transforms.text.side_text import look
from tests.helpers import example_lines


def check_pairs(src: list[str], tgt: list[str], config: FilterConfig) -> dict:
    return check_sides(look(src), look(tgt), config)


def verdicts(pairs, **config):
    src, tgt = zip(*pairs, strict=True) if pairs else ((), ())
    return {
        i: v.reason for i, v in check_pairs(list(src), list(tgt), FilterConfig(**config)).items()
    }


def test_each_reason():
    pairs = [
        ("Hello.", "你好。"),
        ("", "空"),
        ("x" * 30, "y"),
        ("a," * 30, "短句子。" * 3),
        ("OK", "ok"),
        ("long " * 30, "长" * 150),
    ]
    assert verdicts(pairs, max_chars=100, max_t2t_tokens=50, max_length_ratio=9) == {
        1: EMPTY,
        2: LENGTH_RATIO,
        3: TOO_LONG,  # 60 characters but 60 tokens
        4: COPY,
        5: TOO_LONG,  # 150 characters
    }


def test_details_say_which_side_and_how_much():
    (too_long,) = check_pairs(["ok"], ["x" * 20], FilterConfig(max_chars=10)).values()
    assert too_long.detail == "tgt has 20 characters (limit 10)"
    (empty,) = check_pairs([""], [""], FilterConfig()).values()
    assert empty.detail == "src and tgt empty after normalisation"
    (ratio,) = check_pairs(["a" * 20], ["b"], FilterConfig(max_length_ratio=3)).values()
    assert ratio.detail == "20 vs 1 weighted characters, ratio 20.0 (limit 3)"


def test_empty_wins_over_everything_and_copies_can_be_kept():
    assert verdicts([("", "")]) == {0: EMPTY}
    assert verdicts([("Tom", "Tom")], drop_copies=False) == {}


def test_token_limit_counts_t2t_tokens():
    # 5 characters but 5 tokens: "a", ",", "b", ",", "c" (no spaces to drop)
    assert verdicts([("a,b,c", "x")], max_t2t_tokens=4, max_length_ratio=10) == {0: TOO_LONG}
    assert verdicts([("a,b,c", "x")], max_t2t_tokens=5, max_length_ratio=10) == {}


@pytest.mark.parametrize(
    "kwargs", [{"max_chars": 0}, {"max_t2t_tokens": 0}, {"max_length_ratio": 0.5}]
)
def test_bad_limits(kwargs):
    with pytest.raises(ValueError):
        FilterConfig(**kwargs)


def test_length_ratio_defaults_keep_every_correct_ntrex_pair_and_catch_misaligned_ones():
    en = Normalizer(NormalizeConfig())
    zh = Normalizer(NormalizeConfig(keep_fullwidth_punct=True))
    src = en.batch([x.rstrip("\r") for x in example_lines("ntrex128-enzh", "en")])
    tgt = zh.batch([x.rstrip("\r") for x in example_lines("ntrex128-enzh", "zh")])
    config = FilterConfig()
    assert not any(v.reason == LENGTH_RATIO for v in check_pairs(src, tgt, config).values())
    # Shifted by one line, a headline meets a long sentence: those pairs go (a correct
    # pair has about 3 English characters per Chinese one).
    shifted = check_pairs(src[1:], tgt[:-1], config)
    ratio_rejects = {i for i, v in shifted.items() if v.reason == LENGTH_RATIO}
    raw = [len(src[i + 1]) / len(tgt[i]) for i in range(len(src) - 1)]
    gross = {i for i, r in enumerate(raw) if r < 0.4 or r > 25}
    assert len(ratio_rejects) >= 80 and gross and gross <= ratio_rejects
    # A short idiom and its translation are comparable.
    assert check_pairs(["Break a leg!"], ["祝你好运！"], config) == {}


def test_copies_ignore_case_spaces_and_punctuation_in_every_script():
    pairs = [
        ("Straße", "STRASSE"),
        ("你好 ABC", "你好 abc"),
        ("你好", "你好!"),
        ("Ｔｏｍ", "ｔＯｍ"),
        ("TMTUETMU7F / 86530 13994", "TMTUETMU7F/86530 13994"),
        ("?!", "!?"),  # nothing but punctuation: the rules' to judge
        ("Tom!", "汤姆！"),
    ]
    assert verdicts(pairs) == {0: COPY, 1: COPY, 2: COPY, 3: COPY, 4: COPY}


def test_case_folding_neither_makes_nor_removes_han():
    """Why a pair with more Han on one side is never checked for a copy."""
    every = range(sys.maxunicode + 1)
    chars = [chr(cp) for cp in every if cp != 0x0A and not 0xD800 <= cp < 0xE000]
    folded = [char.casefold() for char in chars]
    han = scripts.count(chars)[:, scripts.HAN]
    np.testing.assert_array_equal(scripts.count(folded)[:, scripts.HAN], han)
