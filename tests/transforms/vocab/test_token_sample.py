"""The priority sample of token counts within a substring budget."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from nmtpipe.transforms.vocab import token_sample
from nmtpipe.transforms.vocab.counts import COUNTS_SCHEMA
from nmtpipe.transforms.vocab.kinds.subword import alphabet_of
from nmtpipe.transforms.vocab.kinds.subword_build import escaped_text
from nmtpipe.transforms.vocab.token_sample import characters, sample_counts, uniform


def zipf_counts(n: int, seed: int = 0) -> dict[str, int]:
    """Clause-like tokens with a long tail: most occur once."""
    rng = np.random.default_rng(seed)
    counts = np.minimum(rng.zipf(1.6, n), 10**6)
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 300)]
    return {
        "".join(rng.choice(chars, size=int(rng.integers(1, 12)))) + f"{i}": int(c)
        for i, c in enumerate(counts)
    }


def batches(counts: dict[str, int], size: int) -> list[pa.Table]:
    table = pa.table({"token": list(counts), "count": list(counts.values())}, COUNTS_SCHEMA)
    return [table.slice(i, size) for i in range(0, table.num_rows, size)]


def test_characters_are_those_of_the_escaped_tokens():
    tokens = pa.array(["a", "ab", "你好吗", "x" * 30])
    _, sizes = escaped_text(tokens, alphabet_of(tokens.to_pylist()))
    assert characters(tokens).tolist() == sizes.tolist() == [2, 3, 4, 31]


def test_everything_that_fits_is_kept_exactly():
    counts = zipf_counts(3000)
    sample = sample_counts([batches(counts, 500)], 0)
    assert sample.as_dict() == counts and not sample.pruned
    total = int(characters(pa.array(list(counts))).sum())
    roomy = sample_counts([batches(counts, 500)], total)
    assert roomy.as_dict() == counts and "pruned" not in roomy.report()
    assert roomy.report()["characters"] == total


def test_a_budget_keeps_frequent_tokens_whole_and_the_tail_as_a_scaled_sample():
    counts = zipf_counts(20000)
    total = int(characters(pa.array(list(counts))).sum())
    sample = sample_counts([batches(counts, 777)], total // 5)
    report = sample.report()["pruned"]
    assert report["characters_kept"] <= total // 5 and sample.pruned
    tau = sample.threshold
    assert tau > 1
    got = sample.as_dict()
    for token, count in counts.items():
        if count >= tau:  # always kept, with its own count
            assert got[token] == count
    kept = [t for t in got if counts[t] < tau]
    assert kept and all(got[t] == round(tau) for t in kept)
    # the estimate of the whole token mass is close to the truth
    assert sum(got.values()) == pytest.approx(sum(counts.values()), rel=0.05)


def test_the_sample_does_not_depend_on_how_the_rows_arrive(monkeypatch):
    monkeypatch.setattr(token_sample, "CUT_ROWS", 50)  # cut after nearly every batch
    counts = zipf_counts(5000, seed=1)
    budget = int(characters(pa.array(list(counts))).sum()) // 3
    one = sample_counts([batches(counts, 5000)], budget)
    many = sample_counts([batches(counts, 97)], budget)
    reordered = sample_counts([batches(dict(reversed(counts.items())), 300)], budget)
    assert one.as_dict() == many.as_dict() == reordered.as_dict()


def test_several_datasets_are_summed_per_token():
    a, b = {"x": 3, "y": 1}, {"x": 2, "z": 5}
    sample = sample_counts([batches(a, 10), batches(b, 10)], 0)
    assert sample.as_dict() == {"x": 5, "y": 1, "z": 5}
    assert sample.report()["distinct_tokens"] == 4  # rows read, across the datasets


def test_uniform_draws_are_stable_and_spread():
    tokens = pa.array([f"token{i}" for i in range(20000)])
    u = uniform(tokens, 0)
    assert ((u > 0) & (u < 1)).all() and np.array_equal(u, uniform(tokens, 0))
    assert abs(u.mean() - 0.5) < 0.01 and not np.array_equal(u, uniform(tokens, 1))
