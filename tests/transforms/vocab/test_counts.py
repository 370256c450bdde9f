"""Token counts as Arrow tables: tallies, sums, buckets, the canonical files, the alphabet."""

from __future__ import annotations

import random
import zlib
from collections import Counter

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.prepare_fns import MergeCountsFn
from nmtpipe.transforms.storage import manifest
from nmtpipe.transforms.vocab.counts import (
    COUNTS_SCHEMA,
    CountFile,
    TokenTally,
    bucket_of,
    canonical,
    char_counts,
    count_table,
    into_buckets,
    joined,
    read_counts,
    sum_counts,
    write_chars,
    write_counts,
)
from tests.helpers import IN_MEMORY


def table_of(counts: dict[str, int]) -> pa.Table:
    return pa.table({"token": list(counts), "count": list(counts.values())}, COUNTS_SCHEMA)


def as_dict(table: pa.Table) -> dict[str, int]:
    return dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True))


def test_char_combine_fn_by_hand_and_on_a_runner_with_lifting():
    fn = MergeCountsFn()
    a = fn.add_input(fn.create_accumulator(), {"a": 2, "b": 1})
    b = fn.add_input(fn.create_accumulator(), {"a": 1, "c": 5})
    merged = fn.merge_accumulators([a, b, fn.create_accumulator()])
    assert fn.extract_output(merged) == {"a": 3, "b": 1, "c": 5}
    parts = [("en", {"t": 1, f"w{i}": 1}) for i in range(200)] + [("zh", {"的": 3})]
    with TestPipeline(argv=IN_MEMORY) as p:
        out = p | beam.Create(parts) | beam.CombinePerKey(MergeCountsFn())
        expected = {"t": 200, **{f"w{i}": 1 for i in range(200)}}
        assert_that(out, equal_to([("en", expected), ("zh", {"的": 3})]))


def test_count_table_and_sums_match_a_counter():
    tokens = ["a", "b", "a", "你好", "a"]
    assert as_dict(count_table(pa.array(tokens))) == Counter(tokens)
    back = count_table(pa.array(["a", "你好"]), sign=-1)
    assert as_dict(back) == {"a": -1, "你好": -1}
    summed = sum_counts([count_table(pa.array(tokens)), back])
    assert as_dict(summed) == {"a": 2, "b": 1}  # 你好 cancelled out: dropped
    assert sum_counts([]).num_rows == 0
    assert as_dict(sum_counts([table_of({"x": 0, "y": 2})])) == {"y": 2}


def test_token_tally_folds_and_matches_a_counter(monkeypatch):
    monkeypatch.setattr(TokenTally, "FOLD_ROWS", 3)  # fold after nearly every batch
    tally, expected = TokenTally(), Counter()
    for i in range(20):
        tokens = [f"t{i % 4}", f"t{i % 7}", "common", "common"]
        tally.add(pa.array(tokens))
        expected.update(tokens)
    assert as_dict(tally.take()) == dict(expected)
    assert tally.take().num_rows == 0  # taking empties it


def test_a_tally_is_full_once_it_holds_enough_distinct_tokens(monkeypatch):
    monkeypatch.setattr(TokenTally, "FLUSH_ROWS", 10)
    tally = TokenTally()
    for _ in range(30):
        tally.add(pa.array(["same", "same"]))
    assert not tally.is_full()  # 60 tokens, one distinct
    tally.add(pa.array([f"w{i}" for i in range(9)]))
    assert tally.is_full()


def test_buckets_are_zlibs_crc32_and_split_completely():
    counts = {f"token{i}": i + 1 for i in range(1000)} | {"你好": 3, "": 1}
    table = table_of(counts)
    which = bucket_of(table["token"], 7)
    assert which.tolist() == [zlib.crc32(t.encode()) % 7 for t in counts]
    buckets = into_buckets(table, 7)
    assert sorted(buckets) == list(range(7))  # 1002 tokens reach every bucket
    assert sum(b.num_rows for b in buckets.values()) == len(counts)
    for k, part in buckets.items():
        assert set(bucket_of(part["token"], 7).tolist()) == {k}
    assert as_dict(into_buckets(table, 1)[0]) == counts
    assert into_buckets(COUNTS_SCHEMA.empty_table(), 7) == {}


def _listed(root, written):
    return CountFile(str(root), manifest.file_entry(str(root), written, "counts", 0))


def test_canonical_order_and_round_trip(tmp_path):
    counts = {"b": 2, "a": 2, "c": 5, "é": 1, "z": 2}
    url = str(tmp_path / "en-00000-of-00001.parquet")
    written = write_counts(url, canonical(table_of(counts)))
    assert written.size == (tmp_path / "en-00000-of-00001.parquet").stat().st_size
    rows = pq.read_table(url).to_pylist()
    assert [(r["token"], r["count"]) for r in rows] == [
        ("c", 5), ("a", 2), ("b", 2), ("z", 2), ("é", 1)
    ]  # fmt: skip
    assert read_counts([_listed(tmp_path, written)]) == counts
    shuffled = table_of(dict(reversed(counts.items())))
    again = write_counts(str(tmp_path / "again.parquet"), canonical(shuffled))
    assert again.sha256 == written.sha256


def test_joined_counts_are_the_canonical_sum_of_both_sides():
    rng = random.Random(3)
    en = {f"w{i}": rng.randint(1, 9) for i in range(500)} | {"2019": 4, "OK": 1}
    zh = {f"句{i}": rng.randint(1, 9) for i in range(800)} | {"2019": 2, "OK": 7}
    both = canonical(sum_counts([table_of(en), table_of(zh)]))
    assert joined(canonical(table_of(en)), canonical(table_of(zh))).equals(both)
    assert as_dict(both)["2019"] == 6 and as_dict(both)["OK"] == 8
    apart = joined(canonical(table_of({"a": 1})), canonical(table_of({"b": 2})))
    assert apart.to_pylist() == [{"token": "b", "count": 2}, {"token": "a", "count": 1}]
    assert joined(COUNTS_SCHEMA.empty_table(), COUNTS_SCHEMA.empty_table()).num_rows == 0


def test_char_counts_weight_by_token_count(tmp_path):
    table = table_of({"ab": 2, "b": 1, "你好": 3})
    assert char_counts(table) == {"a": 2, "b": 3, "你": 3, "好": 3}
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
    table = table_of(counts)
    assert char_counts(table) == dict(expected)
    assert char_counts(table.slice(1000)) == char_counts(
        table_of(dict(list(counts.items())[1000:]))
    )
    assert char_counts(COUNTS_SCHEMA.empty_table()) == char_counts(table_of({"": 4})) == {}
