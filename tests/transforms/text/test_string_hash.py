"""String hashes (64-bit, and zlib's CRC-32): stable, independent of how the strings are
laid out in Arrow."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.text.string_hash import crc32, hash64
from tests.helpers import example_lines

STRINGS = ["", "a", "ab", "ba", "héllo", "我们走吧。", "a" * 1000, "I'll do it", "i'll do it"]


def test_hashes_are_fixed_numbers():
    """Stored indexes compare hashes across processes and releases: the values are part of
    the format (a change here needs overlap_index._FORMAT bumped)."""
    got = hash64(pa.array(["", "a", "我们"])).tolist()
    assert got == [0, 5718913436695043505, 14873738071452120140]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), max_size=30), st.integers(0, 30), st.integers(0, 30))
def test_a_string_hashes_the_same_wherever_it_sits(texts, a, b):
    """Sliced arrays, chunked arrays, large strings and nulls (as the empty string) all
    give each string the hash it has alone."""
    alone = [int(hash64(pa.array([t]))[0]) for t in texts]
    array = pa.array(texts, pa.string())
    assert hash64(array).tolist() == alone
    assert hash64(array.cast(pa.large_string())).tolist() == alone
    lo, hi = sorted((min(a, len(texts)), min(b, len(texts))))
    assert hash64(array.slice(lo, hi - lo)).tolist() == alone[lo:hi]
    chunked = pa.chunked_array([array.slice(0, lo), array.slice(lo)], pa.string())
    assert hash64(chunked).tolist() == alone
    with_nulls = pa.array([None, *texts, None], pa.string())
    assert hash64(with_nulls).tolist() == [0, *alone, 0]


def test_different_strings_get_different_hashes():
    texts = sorted(set(example_lines("tatoeba-cmn", "en") + example_lines("tatoeba-cmn", "zh")))
    hashes = hash64(pa.array(texts + STRINGS[1:]))
    assert len(np.unique(hashes)) == len(set(texts + STRINGS[1:]))
    assert hash64(pa.array([""]))[0] == 0


def test_only_strings_are_hashed():
    with pytest.raises(TypeError, match="strings"):
        hash64(pa.array([1, 2]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), max_size=30), st.integers(0, 30))
def test_crc32_is_zlibs_wherever_a_string_sits(texts, a):
    """Count files written before `crc32` existed placed tokens by `zlib.crc32`: the
    vectorised one must agree on every string, sliced, chunked or with nulls."""
    expected = [zlib.crc32(t.encode("utf-8", "surrogatepass")) for t in texts]
    array = pa.array(texts, pa.string())
    assert crc32(array).tolist() == expected
    assert crc32(array.cast(pa.large_string())).tolist() == expected
    lo = min(a, len(texts))
    assert crc32(array.slice(lo)).tolist() == expected[lo:]
    chunked = pa.chunked_array([array.slice(0, lo), array.slice(lo)], pa.string())
    assert crc32(chunked).tolist() == expected
    assert crc32(pa.array([None, *texts], pa.string())).tolist() == [0, *expected]


def test_crc32_of_long_and_many_strings():
    texts = [*STRINGS, *example_lines("tatoeba-cmn", "zh")]
    assert crc32(pa.array(texts)).tolist() == [zlib.crc32(t.encode()) for t in texts]
    with pytest.raises(TypeError, match="strings"):
        crc32(pa.array([1, 2]))
