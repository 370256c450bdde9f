"""Pair filters: each reason, its detail, and which check wins."""

from __future__ import annotations

import pytest

from nmtpipe.transforms.text.filters import (
    COPY,
    EMPTY,
    LENGTH_RATIO,
    TOO_LONG,
    FilterConfig,
    check_pairs,
)


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
    assert verdicts(pairs, max_chars=100, max_tokens=50, max_length_ratio=9) == {
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
    assert verdicts([("a,b,c", "x")], max_tokens=4, max_length_ratio=10) == {0: TOO_LONG}
    assert verdicts([("a,b,c", "x")], max_tokens=5, max_length_ratio=10) == {}


@pytest.mark.parametrize("kwargs", [{"max_chars": 0}, {"max_tokens": 0}, {"max_length_ratio": 0.5}])
def test_bad_limits(kwargs):
    with pytest.raises(ValueError):
        FilterConfig(**kwargs)
