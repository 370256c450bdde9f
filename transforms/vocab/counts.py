"""Token and character counts: bucketed partials, the CombineFn that merges them, Parquet.

Counts are split into buckets by a stable hash of the token, so that no worker ever
holds more than one bucket of distinct tokens and buckets merge and write in parallel.
Files hold rows in the canonical order `(-count, token)`: the same counts always give
the same bytes, and a vocabulary builder reading them sees a deterministic order.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.fsio import WrittenFile
from nmtpipe.transforms.text.split import stable_bucket

# The side of a joined vocabulary: both languages counted together.
JOINED = "joined"
COUNTS_SCHEMA = pa.schema([("token", pa.string()), ("count", pa.int64())])
CHARS_SCHEMA = pa.schema([("side", pa.string()), ("char", pa.string()), ("count", pa.int64())])


class TokenTally:
    """Counts tokens arriving as Arrow arrays, in C++, with memory bounded by the
    number of distinct tokens: per-batch counts are folded together whenever they pile up.
    """

    FOLD_ROWS = 1 << 20

    def __init__(self) -> None:
        self._parts: list[pa.Table] = []
        self._rows = 0

    def add(self, tokens: pa.Array) -> None:
        counted = pc.value_counts(tokens)
        part = pa.table({"token": counted.field(0), "count": counted.field(1)})
        self._parts.append(part)
        self._rows += part.num_rows
        if self._rows > self.FOLD_ROWS:
            self._fold()

    def _fold(self) -> None:
        if len(self._parts) > 1:
            summed = pa.concat_tables(self._parts).group_by("token").aggregate([("count", "sum")])
            self._parts = [summed.rename_columns(["token", "count"])]
            self._rows = self._parts[0].num_rows

    def result(self) -> dict[str, int]:
        self._fold()
        if not self._parts:
            return {}
        table = self._parts[0]
        return dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True))


def into_buckets(counts: Mapping[str, int], buckets: int) -> list[dict[str, int]]:
    """`counts` split into `buckets` dicts by a stable hash of the token."""
    out: list[dict[str, int]] = [{} for _ in range(buckets)]
    if buckets == 1:
        out[0] = dict(counts)
        return out
    for token, count in counts.items():
        out[stable_bucket(token, buckets)][token] = count
    return out


def add_counts(acc: dict[str, int], part: Mapping[str, int]) -> dict[str, int]:
    """Add `part` into `acc` and return `acc`."""
    get = acc.get
    for token, count in part.items():
        acc[token] = get(token, 0) + count
    return acc


def char_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """How often each character occurs in the counted tokens: T2T's alphabet, weighted.

    Summed with numpy over the code points of all tokens at once: a loop over every
    character of every distinct token cost a small corpus more than its cleaning.
    """
    tokens = list(counts)
    lengths = np.fromiter(map(len, tokens), np.int64, len(tokens))
    weights = np.repeat(np.fromiter(counts.values(), np.int64, len(tokens)), lengths)
    text = "".join(tokens).encode("utf-32-le", "surrogatepass")
    points = np.frombuffer(text, dtype=np.uint32)
    if points.size == 0:
        return {}
    order = np.argsort(points, kind="stable")
    points, weights = points[order], weights[order]
    starts = np.flatnonzero(np.r_[True, points[1:] != points[:-1]])
    sums = np.add.reduceat(weights, starts)
    chars = points[starts].tobytes().decode("utf-32-le", "surrogatepass")
    return dict(zip(chars, sums.tolist(), strict=True))


def canonical_rows(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """Counts ordered by `(-count, token)`."""
    return sorted(counts.items(), key=lambda tc: (-tc[1], tc[0]))


def write_counts(url: str, counts: Mapping[str, int]) -> WrittenFile:
    rows = canonical_rows(counts)
    table = pa.table(
        {"token": [t for t, _ in rows], "count": [c for _, c in rows]}, schema=COUNTS_SCHEMA
    )
    return fsio.write_parquet(url, table)


def write_chars(url: str, per_side: Mapping[str, Mapping[str, int]]) -> WrittenFile:
    sides, chars, counts = [], [], []
    for side in sorted(per_side):
        for char, count in canonical_rows(per_side[side]):
            sides.append(side)
            chars.append(char)
            counts.append(count)
    table = pa.table({"side": sides, "char": chars, "count": counts}, schema=CHARS_SCHEMA)
    return fsio.write_parquet(url, table)


class CountFile(NamedTuple):
    """A count file as its prepare manifest lists it: the output's root and the entry."""

    root: str
    entry: Mapping[str, Any]


def _rows(source: CountFile) -> Iterator[tuple[str, int]]:
    """(token, count) rows of one count file, a record batch at a time, its sha256
    checked as it is read (an IntegrityError naming it otherwise)."""
    for batch in manifest.iter_parquet_entry(source.root, source.entry, ["token", "count"]):
        yield from zip(batch["token"].to_pylist(), batch["count"].to_pylist(), strict=True)


def count_files(root: str, prepared: Mapping[str, Any], side: str) -> tuple[list[CountFile], int]:
    """A side's count files in a committed `prepare` manifest, and their rows."""
    entries = {f["path"]: f for f in prepared["files"]}
    paths = prepared["counts"][side]
    return [CountFile(root, entries[p]) for p in paths], sum(entries[p]["rows"] for p in paths)


def read_counts(files: Iterable[CountFile], limit: int | None = None) -> dict[str, int]:
    """The counts of a side's count files; with `limit`, only the `limit` most frequent
    tokens (ties by token), merged from the files' canonical order in bounded memory."""
    streams = [_rows(source) for source in files]
    if limit is None:
        return dict(itertools.chain.from_iterable(streams))
    merged = heapq.merge(*streams, key=lambda tc: (-tc[1], tc[0]))
    return dict(itertools.islice(merged, limit))


def sum_counts(datasets: Iterable[Iterable[CountFile]], limit: int | None = None) -> dict[str, int]:
    """The counts of several datasets' count files summed (a token may be in each);
    `limit` keeps the most frequent after summing (ties by token)."""
    total: Counter[str] = Counter()
    for files in datasets:
        total.update(read_counts(files))
    if limit is None:
        return dict(total)
    return dict(sorted(total.items(), key=lambda tc: (-tc[1], tc[0]))[:limit])
