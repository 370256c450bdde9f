"""Letters per script, counted per line in one pass."""

from __future__ import annotations

import sys

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


def _one_by_one(line: str) -> np.ndarray:
    """`count` of one line, a character at a time: what the vectorised passes must equal."""
    out = np.zeros(7, dtype=np.int64)
    for char in line:
        cp = ord(char)
        if cp <= 0xFFFF:
            script = int(scripts._table()[cp])
        elif char == "𠮶":
            script = scripts.CANTONESE
        else:
            script = scripts.HAN if scripts._ASTRAL_HAN[0] <= cp <= scripts._ASTRAL_HAN[1] else -1
        if script >= 0:
            out[script] += 1
    out[scripts.HAN] += out[scripts.CANTONESE]
    return out


def test_every_code_point_is_counted_as_one_at_a_time():
    """Lines of every code point (ASCII lines apart, empty lines between) and lines
    mixing scripts: the batch passes give what a per-character loop gives."""
    every = range(sys.maxunicode + 1)
    chars = [chr(cp) for cp in every if cp != 0x0A and not 0xD800 <= cp < 0xE000]
    lines = ["".join(chars[i : i + 997]) for i in range(0, len(chars), 997)]
    lines += ["", "abc", "", "日本語 abc", "佢喺度𠮶 😀", "\U00020000x", "".join(chars[:127])]
    expected = np.stack([_one_by_one(line) for line in lines])
    np.testing.assert_array_equal(scripts.count(lines), expected)
