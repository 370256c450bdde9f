"""The T2T SubwordTextEncoder: T2T's own ids (golden), files, invertibility."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder, escape_token, unescape_token
from tests.helpers import DATA

GOLDEN = DATA / "golden"


def golden_encoder(name: str) -> SubwordTextEncoder:
    with gzip.open(
        GOLDEN / f"t2t-vocab-tatoeba.{name}.txt.gz", "rt", encoding="utf-8", newline="\n"
    ) as f:
        return SubwordTextEncoder.from_text(f.read())


@pytest.mark.parametrize("name", ["en.8192", "zh.8192.max6"])
def test_ids_are_t2ts_own(name):
    encoder = golden_encoder(name)
    lines = (GOLDEN / "t2t-encode-lines.txt").read_text(encoding="utf-8").split("\n")[:-1]
    expected = (GOLDEN / f"t2t-encode-tatoeba.{name}.ids").read_text().split("\n")[:-1]
    assert len(lines) == len(expected) == 800
    for line, ids in zip(lines, expected, strict=True):
        assert encoder.encode(line) == [int(i) for i in ids.split()], line
    flat, lengths = encoder.encode_lines(lines)  # the batch path gives T2T's ids too
    assert flat.tolist() == [int(i) for ids in expected for i in ids.split()]
    assert lengths.tolist() == [len(ids.split()) for ids in expected]


def test_vocab_file_round_trip_is_byte_identical():
    with gzip.open(
        GOLDEN / "t2t-vocab-tatoeba.zh.8192.txt.gz", "rt", encoding="utf-8", newline="\n"
    ) as f:
        text = f.read()
    assert SubwordTextEncoder.from_text(text).to_text() == text


def test_loading_accepts_single_double_or_no_quotes():
    quoted = SubwordTextEncoder.from_text("'<pad>_'\n'<EOS>_'\n'a_'\n")
    double = SubwordTextEncoder.from_text('"<pad>_"\n"<EOS>_"\n"a_"\n')
    bare = SubwordTextEncoder.from_text("<pad>_\n<EOS>_\na_")
    assert quoted.subtokens == double.subtokens == bare.subtokens == ("<pad>_", "<EOS>_", "a_")


@pytest.mark.parametrize(
    ("token", "escaped"),
    [
        ("ab", "ab_"),
        ("a_b", "a\\ub_"),
        ("a\\b", "a\\\\b_"),
        ("a\nb", "a\\10;b_"),
        ("aZb", "a\\90;b_"),  # Z is not in the alphabet
    ],
)
def test_escaping(token, escaped):
    alphabet = set("ab\\_u;0123456789\n")
    assert escape_token(token, alphabet) == escaped
    assert unescape_token(escaped) == token


def test_unescaping_an_impossible_code_point_gives_t2ts_stand_in():
    assert unescape_token("\\99999999;_") == "\u3013"


unicode_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40
) | st.lists(
    st.sampled_from(["_", "\\", " ", "  ", "a", "中", "😀", "\n", "\x00", "9;", "\\u"])
).map("".join)


@settings(max_examples=300, deadline=None)
@given(unicode_text)
def test_decode_inverts_encode_for_any_text(text):
    encoder = golden_encoder("en.8192")  # has never seen most of these characters
    assert encoder.decode(encoder.encode(text)) == text


@settings(max_examples=300, deadline=None)
@given(st.lists(unicode_text, max_size=10))
def test_a_batch_encodes_as_each_line_does(lines):
    encoder = golden_encoder("zh.8192.max6")
    flat, lengths = encoder.encode_lines(lines)
    assert flat.dtype == np.int32 and lengths.dtype == np.int64
    assert lengths.tolist() == [len(encoder.encode(line)) for line in lines]
    assert flat.tolist() == [i for line in lines for i in encoder.encode(line)]


def test_strip_extraneous_drops_trailing_reserved_ids_only():
    encoder = golden_encoder("en.8192")
    ids = encoder.encode("Hi.")
    assert encoder.decode([*ids, 1, 0, 0], strip_extraneous=True) == "Hi."
    assert encoder.decode([1, *ids]) == encoder.decode([1, *ids], strip_extraneous=True)
    assert encoder.decode([*ids, 10**9]) == "Hi."  # out-of-range ids decode to nothing
