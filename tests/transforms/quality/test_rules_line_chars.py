"""The rules' character counts and repeat scan, against the regular expressions they
stand for, on lines drawn from every plane and on the bundled corpus."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from nmtpipe.transforms.quality.kinds.rules import line_chars
from tests.helpers import example_lines, unicode_lines


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return unicode_lines(3000, 11) + example_lines("tatoeba-cmn", "zh")[:2000] + [""]


def test_counts_are_re2s(lines):
    found = line_chars(lines, 4)
    texts = pa.array(lines, pa.string())

    def count(pattern: str) -> np.ndarray:
        return pc.count_substring_regex(texts, pattern).to_numpy(zero_copy_only=False)

    spaces = count(r"\s")
    assert np.array_equal(found.chars, pc.utf8_length(texts).to_numpy() - spaces)
    assert np.array_equal(found.punctuation, count(r"[\p{P}\p{S}]"))
    assert np.array_equal(found.letters, count(r"\pL"))


@pytest.mark.parametrize("words", [1, 2, 4])
def test_repeats_are_where_the_regular_expression_finds_them(lines, words):
    repeat = re.compile(rf"\b(\w+)\b(?:\W+\1\b){{{words},}}|(\S)\2{{{2 * words},}}")
    extra = ["no, no, no, no, no!", "好好好好好好好好好", "ab ab abc ab", "x" * 9, "a_a a_a"]
    sample = lines + extra
    expected = np.array([repeat.search(line) is not None for line in sample])
    found = line_chars(sample, words).repeats
    assert np.array_equal(found, expected)
    assert found.any()
