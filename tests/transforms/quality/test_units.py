"""Units: words of spaced scripts, characters of Han and kana, as stable ids."""

from __future__ import annotations

import numpy as np

from nmtpipe.transforms.quality.units import END, START, characters, distinct, of_lists, word_units


def test_words_lowercased_and_each_chinese_character_a_unit_digits_left_out():
    units = word_units(["Tom's 3 cats.", "汤姆有3只猫。", "", "Kyoto京都"])
    assert units.lengths.tolist() == [3, 5, 0, 3]
    again = of_lists(
        [["tom", "s", "cats"], ["汤", "姆", "有", "只", "猫"], [], ["kyoto", "京", "都"]]
    )
    assert np.array_equal(units.values, again.values)
    assert np.array_equal(
        units.values, word_units(["TOM'S 3 CATS", "汤姆有3只猫", "", "kyoto 京都"]).values
    )


def test_distinct_units_per_line_and_take():
    units = distinct(of_lists([["a", "b", "a"], ["b", "b"], []]))
    assert units.lengths.tolist() == [2, 1, 0]
    taken = units.take(np.array([1, 0]))
    assert taken.lengths.tolist() == [1, 2]
    assert taken.values[0] == units.values[2]


def test_characters_between_marks_spaces_left_out():
    chars = characters(["a b", "", "猫"])
    assert chars.lengths.tolist() == [4, 2, 3]
    assert chars.values.tolist() == [START, 97, 98, END, START, END, START, ord("猫"), END]
