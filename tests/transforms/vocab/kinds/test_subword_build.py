"""The vocabulary builder: byte-identical to Tensor2Tensor's, on golden files and on
random counts against a plain transcription of T2T's algorithm, whether it holds every
token in memory or a chunk at a time from disk."""

from __future__ import annotations

import gzip
import tempfile
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.vocab.kinds.subword import (
    RESERVED_TOKENS,
    SubwordTextEncoder,
    alphabet_of,
    escape_token,
)
from nmtpipe.transforms.vocab.kinds.subword_build import SubwordBuilder
from tests.helpers import DATA, golden_counts

GOLDEN = DATA / "golden"


def golden_vocab(name: str) -> str:
    with gzip.open(
        GOLDEN / f"t2t-vocab-tatoeba.{name}.txt.gz", "rt", encoding="utf-8", newline="\n"
    ) as f:
        return f.read()


@pytest.fixture(scope="module")
def counts():
    return {lang: dict(golden_counts(f"t2t-counts-tatoeba.{lang}.tsv.gz")) for lang in ("en", "zh")}


@pytest.mark.parametrize(
    ("lang", "target", "max_length"),
    [
        ("en", 8192, None),
        ("zh", 8192, None),
        ("zh", 8192, 6),
        ("zh", 32768, None),
        ("zh", 32768, 6),
    ],
)
def test_build_to_target_size_writes_t2ts_file(counts, lang, target, max_length):
    vocab, trace = SubwordBuilder(counts[lang], max_length).build_to_target_size(target)
    name = f"{lang}.{target}" + (f".max{max_length}" if max_length else "")
    assert SubwordTextEncoder(vocab).to_text() == golden_vocab(name)
    assert trace.steps[0] == (500, trace.steps[0][1])  # T2T's first try: (1 + 1000) // 2
    assert len(vocab) in [n for _, n in trace.steps]


@pytest.mark.parametrize(("lang", "target", "max_length"), [("en", 8192, None), ("zh", 8192, 6)])
def test_tokens_held_in_chunks_on_disk_give_t2ts_file(
    counts, lang, target, max_length, tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with SubwordBuilder(counts[lang], max_length, max_characters=20_000, threads=2) as builder:
        assert len(builder.chunks) >= 5 and builder.chunks.spilled
        vocab, _ = builder.build_to_target_size(target)
        used = builder.subtoken_counts(vocab)
    name = f"{lang}.{target}" + (f".max{max_length}" if max_length else "")
    assert SubwordTextEncoder(vocab).to_text() == golden_vocab(name)
    whole = SubwordBuilder(counts[lang], max_length)
    assert used.tolist() == whole.subtoken_counts(whole.build_to_target_size(target)[0]).tolist()
    assert list(tmp_path.iterdir()) == []  # the chunks' files are gone


@pytest.mark.parametrize(
    ("lang", "min_count", "max_length", "name"),
    [("en", 3, None, "en.min3"), ("zh", 2, 4, "zh.min2.max4")],
)
def test_build_from_token_counts_writes_t2ts_file(counts, lang, min_count, max_length, name):
    vocab = SubwordBuilder(counts[lang], max_length).build(min_count)
    assert SubwordTextEncoder(vocab).to_text() == golden_vocab(name)


def reference_build(token_counts, min_count, num_iterations=4, max_length=None):
    """Tensor2Tensor's build_from_token_counts, transcribed plainly: the slow original."""
    alphabet = alphabet_of([*token_counts, *RESERVED_TOKENS])
    vocab = set(alphabet)
    longest = 1
    result: list[str] = []
    min_count = max(min_count, 1)
    for _ in range(num_iterations):
        counted = defaultdict(int)
        for token, count in token_counts.items():
            escaped = escape_token(token, alphabet)
            start = 0
            while start < len(escaped):
                stop = (
                    len(escaped) + 1
                    if max_length is None
                    else min(len(escaped) + 1, start + max_length)
                )
                for end in range(start + 1, stop):
                    counted[escaped[start:end]] += count
                end = next(
                    e
                    for e in range(min(len(escaped), start + longest), start, -1)
                    if escaped[start:e] in vocab
                )
                start = end
        by_length = defaultdict(set)
        for s, c in counted.items():
            if c >= min_count:
                by_length[len(s)].add(s)
        picked = []
        for length in sorted(by_length, reverse=True):
            for s in by_length[length]:
                c = counted[s]
                if c >= min_count:
                    if s not in alphabet:
                        picked.append((c, s))
                    for k in range(1, length):
                        counted[s[:k]] -= c
        picked += [(counted.get(a, 0), a) for a in alphabet]
        picked.sort(reverse=True)
        result = [escape_token(t, alphabet) for t in RESERVED_TOKENS] + [s for _, s in picked]
        vocab = set(result)
        longest = max(len(s) for s in result)
    return result


tokens = st.lists(
    st.sampled_from(
        ["a", "b", "ab", "_", "\\", "中", "中文", "x\ny", " ", "  ", "9;", "abab", "<pad>"]
    ),
    min_size=1,
    max_size=4,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(tokens, st.integers(1, 50), min_size=1, max_size=25),
    st.integers(1, 6),
    st.sampled_from([None, 1, 2, 3, 5]),
    st.sampled_from([0, 2, 18]),  # characters held at once (0: all), by two threads
)
def test_fast_build_equals_the_plain_algorithm(token_counts, min_count, max_length, chunk):
    fast = SubwordBuilder(token_counts, max_length, max_characters=chunk, threads=2)
    assert fast.build(min_count) == reference_build(token_counts, min_count, max_length=max_length)


def test_bad_arguments():
    with pytest.raises(ValueError, match="must start with"):
        SubwordBuilder({"a": 1}, reserved_tokens=("<EOS>", "<pad>"))
    builder = SubwordBuilder({"a": 1}, reserved_tokens=("<pad>", "<EOS>", "<mask>"))
    assert builder.build(1)[:3] == ["<pad>_", "<EOS>_", "<mask>_"]
    with pytest.raises(ValueError, match="lower bound"):
        builder.build_to_target_size(10, 5, 2)
    with pytest.raises(ValueError, match="positive"):
        builder.build_to_target_size(0)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(tokens, st.integers(1, 50), min_size=1, max_size=25),
    st.lists(st.integers(1, 40), min_size=2, max_size=5),
    st.sampled_from([None, 2, 5]),
    st.sampled_from([0, 14]),
)
def test_one_builder_serves_builds_above_and_below_its_tables_floor(
    token_counts, min_counts, max_length, chunk
):
    """A table keeps only substrings counted at least its floor; builds below it make a
    new one, builds above reuse it: each result is the plain algorithm's."""
    builder = SubwordBuilder(token_counts, max_length, max_characters=chunk, threads=2)
    for min_count in min_counts:
        expected = reference_build(token_counts, min_count, max_length=max_length)
        assert builder.build(min_count) == expected


def encoded_counts(vocab: list[str], token_counts: dict[str, int]) -> list[int]:
    """How often each subtoken is used to encode the tokens, by T2T's own encoder."""
    encoder = SubwordTextEncoder(vocab)
    totals = [0] * len(vocab)
    for token, count in token_counts.items():
        for i in encoder.token_ids(token):
            totals[i] += count
    return totals


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(tokens, st.integers(1, 50), min_size=1, max_size=25),
    st.integers(1, 6),
    st.sampled_from([None, 2, 5]),
    st.sampled_from([0, 14]),
)
def test_subtoken_counts_are_what_encoding_every_token_uses(
    token_counts, min_count, max_length, chunk
):
    builder = SubwordBuilder(token_counts, max_length, max_characters=chunk, threads=2)
    vocab = builder.build(min_count)
    assert builder.subtoken_counts(vocab).tolist() == encoded_counts(vocab, token_counts)


def test_subtoken_counts_of_a_real_vocabulary(counts):
    builder = SubwordBuilder(counts["zh"])
    vocab, _ = builder.build_to_target_size(8192)
    assert builder.subtoken_counts(vocab).tolist() == encoded_counts(vocab, counts["zh"])
