"""Pair shards: deduplication with a deterministic survivor, sorted rows, rejects."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq

from nmtpipe.transforms.formats.batch_transport import inline
from nmtpipe.transforms.formats.pair_shards import write_pair_shard, write_rejects
from nmtpipe.transforms.text.records import REJECTS_SCHEMA, Reject, pair_batch, reject_batch


def batch(origin, rows):
    ids, src, tgt, lines = zip(*rows, strict=True)
    return inline(
        pair_batch(
            origin, pa.array(ids, pa.int64()), list(src), list(tgt), pa.array(lines, pa.int64())
        )
    )


def test_duplicates_dropped_whatever_the_order_and_survivor_is_smallest_origin_line(tmp_path):
    batches = [
        batch("b.{en,zh}", [(7, "x", "X", 3), (5, "y", "Y", 1)]),
        batch("a.{en,zh}", [(7, "x", "X", 9), (7, "x", "X", 2)]),
        batch("a.{en,zh}", [(7, "other", "pair with a colliding id", 4)]),
    ]
    digests = set()
    for seed in range(5):
        random.Random(seed).shuffle(batches)
        result = write_pair_shard(str(tmp_path / f"s{seed}.parquet"), batches)
        digests.add(result.written.sha256)
        rows = pq.read_table(tmp_path / f"s{seed}.parquet").to_pylist()
        assert [(r["id"], r["src"], r["origin"], r["line"]) for r in rows] == [
            (5, "y", "b.{en,zh}", 1),
            (7, "other", "a.{en,zh}", 4),
            (7, "x", "a.{en,zh}", 2),
        ]
        assert sorted(
            (d["origin"], d["line"], d["detail"]) for d in result.duplicates.to_pylist()
        ) == [
            ("a.{en,zh}", 9, "same pair as a.{en,zh}:2"),
            ("b.{en,zh}", 3, "same pair as a.{en,zh}:2"),
        ]
        assert result.stats["pairs"] == 3
    assert len(digests) == 1  # the same bytes every time


def test_empty_shard(tmp_path):
    result = write_pair_shard(str(tmp_path / "e.parquet"), [])
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0 == result.table.num_rows


def test_rejects_sorted_with_raw_bytes(tmp_path):
    rejects = [
        Reject("b", 2, "copy", "target is a copy of the source", b"x", b"x"),
        Reject("a", 9, "invalid-utf8", "src: invalid start byte at byte 0", b"\xff", b"ok"),
        Reject("a", 3, "bad-columns", "1 tab-separated columns, need at least 2", b"one", None),
    ]
    shipped = [inline(reject_batch(rejects[:1])), inline(reject_batch(rejects[1:]))]
    _, n = write_rejects(str(tmp_path / "r.parquet"), shipped)
    table = pq.read_table(tmp_path / "r.parquet")
    assert n == 3 and table.schema == REJECTS_SCHEMA
    assert [(r["origin"], r["line"], r["src"]) for r in table.to_pylist()] == [
        ("a", 3, b"one"),
        ("a", 9, b"\xff"),
        ("b", 2, b"x"),
    ]
