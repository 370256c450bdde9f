"""Token counts: the CombineFn (alone and on a runner), buckets, files."""

from __future__ import annotations

import random
from collections import Counter

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.prepare_fns import MergeCountsFn
from nmtpipe.transforms.storage import manifest
from nmtpipe.transforms.vocab.counts import (
    CountFile,
    canonical_rows,
    char_counts,
    into_buckets,
    read_counts,
    write_chars,
    write_counts,
)
from tests.helpers import IN_MEMORY


def test_combine_fn_by_hand():
    fn = MergeCountsFn()
    a = fn.add_input(fn.create_accumulator(), {"a": 2, "b": 1})
    b = fn.add_input(fn.create_accumulator(), {"a": 1, "c": 5})
    merged = fn.merge_accumulators([a, b, fn.create_accumulator()])
    assert fn.extract_output(merged) == {"a": 3, "b": 1, "c": 5}


def test_combine_on_a_runner_with_lifting_and_hot_key_fanout():
    parts = [("en", {"the": 1, f"w{i}": 1}) for i in range(200)] + [("zh", {"的": 3})]
    expected_en = {"the": 200, **{f"w{i}": 1 for i in range(200)}}
    with TestPipeline(argv=IN_MEMORY) as p:
        out = p | beam.Create(parts) | beam.CombinePerKey(MergeCountsFn()).with_hot_key_fanout(4)
        assert_that(out, equal_to([("en", expected_en), ("zh", {"的": 3})]))


def test_buckets_split_counts_stably_and_completely():
    counts = {f"token{i}": i for i in range(1000)}
    buckets = into_buckets(counts, 7)
    assert len(buckets) == 7
    assert sum(len(b) for b in buckets) == 1000
    assert into_buckets(counts, 7) == buckets
    assert all(buckets)  # 1000 tokens spread over every bucket
    assert into_buckets(counts, 1) == [counts]


def _listed(root, written):
    return CountFile(str(root), manifest.file_entry(str(root), written, "counts", 0))


def test_canonical_order_and_round_trip(tmp_path):
    counts = {"b": 2, "a": 2, "c": 5, "é": 1}
    assert canonical_rows(counts) == [("c", 5), ("a", 2), ("b", 2), ("é", 1)]
    url = str(tmp_path / "en-00000-of-00001.parquet")
    written = write_counts(url, counts)
    assert written.size == (tmp_path / "en-00000-of-00001.parquet").stat().st_size
    first = _listed(tmp_path, written)
    assert list(read_counts([first]).items()) == canonical_rows(counts)
    other = _listed(tmp_path, write_counts(str(tmp_path / "en-00001.parquet"), {"d": 3, "a0": 2}))
    assert read_counts([first, other], limit=3) == {"c": 5, "d": 3, "a": 2}
    assert (
        write_counts(str(tmp_path / "again.parquet"), dict(reversed(counts.items()))).sha256
        == written.sha256
    )


def test_char_counts_weight_by_token_count(tmp_path):
    assert char_counts({"ab": 2, "b": 1, "你好": 3}) == {"a": 2, "b": 3, "你": 3, "好": 3}
    write_chars(str(tmp_path / "chars.parquet"), {"zh": {"你": 3}, "en": Counter("aab")})
    rows = pq.read_table(tmp_path / "chars.parquet").to_pylist()
    assert rows == [
        {"side": "en", "char": "a", "count": 2},
        {"side": "en", "char": "b", "count": 1},
        {"side": "zh", "char": "你", "count": 3},
    ]


def test_char_counts_match_a_loop_over_every_character():
    rng = random.Random(0)
    alphabet = "ab 你好\U0001f600é\u0301"
    counts = {
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))): rng.randint(1, 10**12)
        for _ in range(2000)
    }
    expected: Counter[str] = Counter()
    for token, count in counts.items():
        for char in token:
            expected[char] += count
    assert char_counts(counts) == dict(expected)
    assert char_counts({}) == char_counts({"": 4}) == {}


def test_token_tally_folds_and_matches_a_counter(monkeypatch):
    import pyarrow as pa

    from nmtpipe.transforms.vocab.counts import TokenTally

    monkeypatch.setattr(TokenTally, "FOLD_ROWS", 3)  # fold after nearly every batch
    tally, expected = TokenTally(), Counter()
    for i in range(20):
        tokens = [f"t{i % 4}", f"t{i % 7}", "common", "common"]
        tally.add(pa.array(tokens))
        expected.update(tokens)
    assert tally.result() == dict(expected)
    assert TokenTally().result() == {}
