"""Units: words of spaced scripts, characters of Han and kana, as stable ids."""

from __future__ import annotations

import random
import re

import numpy as np

from nmtpipe.transforms.quality.units import (
    END,
    START,
    Ragged,
    characters,
    distinct,
    of_lists,
    word_units,
)


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


def test_the_compiled_split_is_pythons_regex_on_every_code_point():
    """Runs of what `re` calls a letter (`[^\\W\\d_]`), each Han or kana character
    alone: lines drawn from every plane, with ASCII between."""
    cjk = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    unit = re.compile(rf"[{cjk}]|[^\W\d_{cjk}]+")
    pool = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    rng = random.Random(7)
    lines = [
        "".join(
            chr(rng.choice(pool)) if rng.random() < 0.5 else rng.choice("ab Z_9.é京 ")
            for _ in range(rng.randrange(40))
        )
        for _ in range(3000)
    ]
    found = [unit.findall(line.lower()) for line in lines]
    units, expected = word_units(lines), of_lists(found)
    assert np.array_equal(units.starts, expected.starts)
    assert np.array_equal(units.values, expected.values)
    distinct_units = {u for line in found for u in line}
    assert len(set(units.values.tolist())) == len(distinct_units) > 3000


def test_distinct_units_are_each_lines_sorted_set():
    rng = np.random.default_rng(3)
    lists = [rng.integers(0, 9, rng.integers(0, 30)).tolist() for _ in range(500)]
    lengths = [len(values) for values in lists]
    units = Ragged(
        np.concatenate([np.zeros(0), *lists]).astype(np.uint64),
        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
    )
    found = distinct(units)
    assert [
        found.values[a:b].tolist() for a, b in zip(found.starts[:-1], found.starts[1:], strict=True)
    ] == [sorted(set(values)) for values in lists]


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
