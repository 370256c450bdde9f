"""The T2T tokenizer against Tensor2Tensor's own counts (golden files) and itself."""

from __future__ import annotations

import sys
import unicodedata
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer
from tests.helpers import GOLDEN, example_lines, golden_counts


def test_alphanumeric_set_is_t2ts_for_every_code_point():
    # T2T: Unicode category L* or N*, over range(sys.maxunicode).
    table = t2t_tokenizer.alnum_table()
    for cp in range(sys.maxunicode + 1):
        expected = cp < sys.maxunicode and unicodedata.category(chr(cp))[0] in "LN"
        assert table[cp] == expected, hex(cp)
        assert t2t_tokenizer.is_alnum(chr(cp)) == expected, hex(cp)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", []),
        ("Hello, world.", ["Hello", ", ", "world", "."]),
        ("a b c", ["a", "b", "c"]),
        ("a  b", ["a", "  ", "b"]),
        (" a ", [" ", "a", " "]),
        ("x_y", ["x", "_", "y"]),
        ("他是一个 DJ 。", ["他是一个", "DJ", " 。"]),
        ("1,000.5", ["1", ",", "000", ".", "5"]),
    ],
)
def test_encode_examples(text, tokens):
    assert t2t_tokenizer.encode(text) == tokens


def test_decode_puts_spaces_back_between_alphanumeric_tokens():
    text = "Hello, world. 我是学生 and 2 cats"
    assert t2t_tokenizer.decode(t2t_tokenizer.encode(text)) == text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_counts_equal_t2t_on_the_normalised_example_corpus(lang):
    # The golden counts were made from every other line of the corpus (16,014 pairs).
    lines = Normalizer(NormalizeConfig()).batch(example_lines("tatoeba-cmn", lang)[::2])
    assert t2t_tokenizer.count_tokens(lines) == golden_counts(f"t2t-counts-tatoeba.{lang}.tsv.gz")


def test_counts_equal_t2t_on_tricky_unicode():
    lines = (GOLDEN / "tricky.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert t2t_tokenizer.count_tokens(lines) == golden_counts("t2t-counts-tricky.tsv.gz")
    per_line: Counter[str] = Counter()
    for line in lines:
        per_line.update(t2t_tokenizer.encode(line))
    assert per_line == golden_counts("t2t-counts-tricky.tsv.gz")


line_text = st.text(
    alphabet=st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(st.lists(line_text, max_size=12))
def test_batched_counting_equals_per_line_encoding(lines):
    expected: Counter[str] = Counter()
    for line in lines:
        expected.update(t2t_tokenizer.encode(line))
    assert t2t_tokenizer.count_tokens(lines) == expected


def test_token_array_keeps_line_order_and_survives_odd_text():
    lines = ["a b,c", "", "中文 x", "nul\x00here", "\U0001f600!"]
    expected = [t for line in lines for t in t2t_tokenizer.encode(line)]
    assert sorted(t2t_tokenizer.token_array(lines).to_pylist()) == sorted(expected)
    assert t2t_tokenizer.token_array(["a b,c"]).to_pylist() == ["a", "b", ",", "c"]
    with pytest.raises(UnicodeEncodeError):
        t2t_tokenizer.token_array(["lone \ud800 surrogate"])


odd_line = line_text | st.lists(
    st.sampled_from(["a", "中", " ", "  ", ",", "\x00", "\n", "\U0001f600", "9"])
).map("".join)  # line breaks inside a line, NULs and runs of spaces too


@settings(max_examples=300, deadline=None)
@given(st.lists(odd_line, max_size=12))
def test_line_tokens_are_each_lines_encoding_in_order(lines):
    tokens, counts = t2t_tokenizer.line_tokens(lines)
    assert counts.tolist() == [len(t2t_tokenizer.encode(line)) for line in lines]
    assert tokens.to_pylist() == [t for line in lines for t in t2t_tokenizer.encode(line)]
