"""One look at a side: lengths, scripts, T2T tokens and function words from one pass
agree with the per-line definitions they replace, on real corpora and every code point."""

from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np
import pytest

from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.langid import function_words, scripts
from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer
from nmtpipe.transforms.text.side_text import look
from tests.helpers import DATA, example_lines

ODD = [
    "Hello, World 42",
    "",
    "日本語です",
    "佢喺度𠮶 emoji 😀 here",
    "  spaced  out ",
    "nul\x00inside",
    "İstanbul İthe war",
    "Привет, мир",
    "é",
]


def _corpora() -> dict[str, list[str]]:
    en, zh = Normalizer(NormalizeConfig()), Normalizer(NormalizeConfig(keep_fullwidth_punct=True))
    sides = {
        "odd": ODD,
        "tatoeba-en": en.batch([x.rstrip("\r") for x in example_lines("tatoeba-cmn", "en")]),
        "tatoeba-zh": zh.batch([x.rstrip("\r") for x in example_lines("tatoeba-cmn", "zh")]),
        "ntrex-en": en.batch([x.rstrip("\r") for x in example_lines("ntrex128-enzh", "en")]),
        "ntrex-zh": zh.batch([x.rstrip("\r") for x in example_lines("ntrex128-enzh", "zh")]),
    }
    for path in sorted((DATA / "langid").glob("*.txt")):
        sides[path.stem] = en.batch(path.read_text(encoding="utf-8").splitlines())
    return sides


CORPORA = _corpora()


def _by_line(tokens: list[str], owner: np.ndarray) -> dict[int, list[str]]:
    lines: dict[int, list[str]] = defaultdict(list)
    for token, line in zip(tokens, owner.tolist(), strict=True):
        lines[line].append(token)
    return lines


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_one_look_measures_what_each_measure_did_alone(name):
    lines = CORPORA[name]
    side = look(lines)
    assert side.lengths.tolist() == [len(line) for line in lines]
    np.testing.assert_array_equal(side.scripts, scripts.count(lines))
    by_line = _by_line(side.tokens.to_pylist(), side.owner)
    assert all(by_line[i] == t2t_tokenizer.encode(line) for i, line in enumerate(lines))
    np.testing.assert_array_equal(function_words.side_hits(side), function_words.hits(lines))


def test_tokens_of_some_lines():
    side = look(ODD)
    rows = np.zeros(len(ODD), dtype=bool)
    rows[[0, 2]] = True
    assert sorted(side.tokens_of(rows).to_pylist()) == sorted(
        ["Hello", ", ", "World", "42", "日本語です"]
    )
    assert side.tokens_of(np.ones(len(ODD), dtype=bool)).equals(side.tokens)
    assert look([]).tokens.to_pylist() == [] and look([]).scripts.shape == (0, 7)


def test_function_words_agree_around_every_code_point():
    """Lower-casing tokens instead of whole lines counts the same words next to every
    code point (İ, whose lower case is two characters, included)."""
    chars = [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp < 0xE000]
    chars.remove("\n")
    groups = [
        chars[i : i + 4] + ["x"] * (4 - len(chars[i : i + 4])) for i in range(0, len(chars), 4)
    ]
    lines = [f"The{a}the {b}und Der{c} LA{d}la" for a, b, c, d in groups]
    side = look(lines)
    np.testing.assert_array_equal(function_words.side_hits(side), function_words.hits(lines))
