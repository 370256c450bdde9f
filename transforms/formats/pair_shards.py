"""Parquet shards of pairs and of rejects: deduplicated, sorted, written atomically.

A shard's rows are sorted by id (then text, origin and line), so a shard's bytes depend
only on which pairs it holds, never on the order a runner delivered them. Exact
duplicates always share a shard (the shard comes from the pair's hash), so dropping
them needs no global state: the survivor is the copy with the smallest (origin, line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.formats.batch_transport import Shipped, pairs_table, rejects_table
from nmtpipe.transforms.storage.fsio import WrittenFile, write_parquet
from nmtpipe.transforms.text import stats
from nmtpipe.transforms.text.filters import DUPLICATE
from nmtpipe.transforms.text.overlap import Protected
from nmtpipe.transforms.text.records import REJECTS_SCHEMA, SORT_KEYS, locations, reject_rows


@dataclass
class PairShard:
    """What writing one pair shard produced: the file, the rows kept, and the rows
    dropped as duplicates, overlap or by the pair scorers (`duplicates`, in
    REJECTS_SCHEMA)."""

    written: WrittenFile
    table: pa.Table
    duplicates: pa.Table
    stats: stats.Partial
    scores: stats.Partial  # the scores' histograms, where pair scorers judged the shard


def _duplicate_mask(table: pa.Table) -> np.ndarray:
    """True for each row that repeats the pair of the row before it (table sorted)."""
    ids = table["id"].to_numpy()
    dup = np.zeros(len(ids), dtype=bool)
    same_id = np.flatnonzero(ids[1:] == ids[:-1]) + 1
    if same_id.size:
        here, before = pa.array(same_id), pa.array(same_id - 1)
        same = [
            pc.equal(table[side].take(here), table[side].take(before)) for side in ("src", "tgt")
        ]
        dup[same_id] = pc.and_(*same).to_numpy(zero_copy_only=False)
    return dup


def _duplicates(table: pa.Table, dup: np.ndarray) -> pa.Table:
    """The repeated rows as rejects, each naming the first row of its run of equal
    pairs (the copy that stays)."""
    rows = np.flatnonzero(dup)
    survivor = np.maximum.accumulate(np.where(dup, 0, np.arange(len(dup))))[rows]
    kept = pa.array(survivor)
    where = locations(table["origin"].take(kept).cast(pa.string()), table["line"].take(kept))
    detail = pc.binary_join_element_wise("same pair as ", where, "")
    return reject_rows(table, rows, DUPLICATE, detail)


def split_stats(table: pa.Table) -> stats.Partial:
    lengths = {side: pc.utf8_length(table[side]).to_numpy() for side in ("src", "tgt")}
    return {"pairs": table.num_rows, **{s: stats.side_partial(n) for s, n in lengths.items()}}


# What a shard's pairs become after the pair scorers (`quality/judge.py`): the pairs
# kept, with their score columns; the rejects; the statistics partial of the scores.
Judge = Callable[[pa.Table], tuple[pa.Table, pa.Table, stats.Partial]]


def write_pair_shard(
    url: str,
    batches: Iterable[Shipped],
    split: str = "train",
    protected: Protected | None = None,
    keep_overlap: bool = False,
    judge: Judge | None = None,
) -> PairShard:
    """Deduplicate, sort and write one shard of `split` from inline or spilled pair
    batches; pairs that `protected` (the splits that outrank this one) holds, or whose
    sides it holds, are dropped too (`overlap.py`), and then those the `judge` rejects."""
    table = pairs_table(batches).sort_by(SORT_KEYS)
    dup = _duplicate_mask(table)
    dropped = [_duplicates(table, dup)] if dup.any() else []
    if dropped:
        table = table.filter(pa.array(~dup))
    if protected is not None:
        gone, excluded = protected.exclude(table, split, keep_overlap)
        if excluded.num_rows:
            dropped.append(excluded)
            table = table.filter(pa.array(~gone))
    scores: stats.Partial = {}
    if judge is not None:
        table, judged, scores = judge(table)
        dropped.append(judged)
    duplicates = pa.concat_tables(dropped) if dropped else REJECTS_SCHEMA.empty_table()
    written = write_parquet(url, table)
    return PairShard(written, table, duplicates, split_stats(table), scores)


def write_rejects(url: str, batches: Iterable[Shipped]) -> tuple[WrittenFile, int]:
    """Write shipped reject batches sorted by (origin, line, reason); return the file and
    its row count."""
    table = rejects_table(batches)
    return write_parquet(url, table), table.num_rows
