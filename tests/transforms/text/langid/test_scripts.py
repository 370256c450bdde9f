"""Letters per script, counted per line in one pass."""

from __future__ import annotations

import numpy as np

from nmtpipe.transforms.text.langid import scripts


def test_letters_are_counted_per_script_and_line():
    counts = scripts.count(
        ["Hello, World 42", "", "日本語です", "한국어", "Привет", "佢喺度𠮶", "é"]
    )
    expected = np.zeros((7, 7), dtype=np.int32)
    expected[0, scripts.LATIN] = 10
    expected[2, [scripts.HAN, scripts.KANA]] = 3, 2
    expected[3, scripts.HANGUL] = 3
    expected[4, scripts.CYRILLIC] = 6
    expected[5, [scripts.HAN, scripts.CANTONESE]] = 4, 3
    expected[6, scripts.LATIN] = 1
    np.testing.assert_array_equal(counts, expected)


def test_weighted_lengths_make_english_and_chinese_comparable():
    lines = ["I like tea.", "我喜欢茶。"]
    lengths = scripts.weighted_lengths(np.array([11, 5]), scripts.count(lines))
    assert lengths.tolist() == [11.0, 13.0]  # 4 Han x 3 + the full stop
