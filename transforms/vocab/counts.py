"""Token and character counts as Arrow tables: tallied, bucketed, summed and written
without a Python object per token.

Real text has nearly one distinct Chinese T2T token per clause and a long tail of
English names and numbers, so the number of distinct tokens grows almost as fast as the
corpus: counting must cost C++ time per token, never Python time per distinct token, and
no process may hold all of them. A worker tallies its chunks' tokens until the tally
holds `TokenTally.FLUSH_ROWS` distinct tokens, then sends it on split into buckets by a
stable hash of the token; each bucket's partial tallies are summed in one place and
written as a file. Files hold rows in the canonical order `(-count, token)`: the same
counts always give the same bytes, and a reader sees a deterministic order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.fsio import WrittenFile
from nmtpipe.transforms.text.records import by_key, utf8_text
from nmtpipe.transforms.text.string_hash import crc32

# The side of a joined vocabulary: both languages counted together.
JOINED = "joined"
COUNTS_SCHEMA = pa.schema([("token", pa.string()), ("count", pa.int64())])
CHARS_SCHEMA = pa.schema([("side", pa.string()), ("char", pa.string()), ("count", pa.int64())])
CANONICAL = [("count", "descending"), ("token", "ascending")]


def count_table(tokens: pa.Array, sign: int = 1) -> pa.Table:
    """How often each token occurs in `tokens` (times `sign`: -1 takes counts back)."""
    counted = pc.value_counts(tokens)
    counts = counted.field(1).cast(pa.int64())
    if sign != 1:
        counts = pc.multiply(counts, sign)
    return pa.table([counted.field(0).cast(pa.string()), counts], schema=COUNTS_SCHEMA)


def sum_counts(tables: Iterable[pa.Table]) -> pa.Table:
    """Tables of counts summed per token; tokens whose counts cancel out are dropped."""
    tables = list(tables)
    if not tables:
        return COUNTS_SCHEMA.empty_table()
    if len(tables) == 1:
        table = tables[0]
    else:
        grouped = pa.concat_tables(tables).group_by("token").aggregate([("count", "sum")])
        table = pa.table([grouped["token"], grouped["count_sum"]], schema=COUNTS_SCHEMA)
    return table.filter(pc.not_equal(table["count"], 0))


class TokenTally:
    """Counts of the tokens of many batches, in C++. Each batch's counts are kept as
    they come and folded together once they outgrow the last fold; `is_full` says when the
    tally holds enough distinct tokens that it should be sent on (`take`)."""

    FOLD_ROWS = 1 << 15
    FLUSH_ROWS = 1 << 17

    def __init__(self) -> None:
        self._parts: list[pa.Table] = []
        self._folded = 0  # rows of the last fold (the first part)
        self._rows = 0

    def add(self, tokens: pa.Array) -> None:
        part = count_table(tokens)
        self._parts.append(part)
        self._rows += part.num_rows
        if self._rows - self._folded > max(self.FOLD_ROWS, self._folded):
            self._fold()

    def _fold(self) -> None:
        if len(self._parts) > 1:
            self._parts = [sum_counts(self._parts)]
        self._folded = self._rows = self._parts[0].num_rows if self._parts else 0

    def is_full(self) -> bool:
        """Whether the tally holds `FLUSH_ROWS` distinct tokens (folded first: a token
        in several batches' counts is one row)."""
        if self._rows < self.FLUSH_ROWS:
            return False
        self._fold()
        return self._rows >= self.FLUSH_ROWS

    def take(self) -> pa.Table:
        """The counts so far, summed; the tally starts again empty."""
        self._fold()
        table = self._parts[0] if self._parts else COUNTS_SCHEMA.empty_table()
        self._parts, self._folded, self._rows = [], 0, 0
        return table


def bucket_of(tokens: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """Each token's bucket: CRC-32 of its UTF-8 bytes, modulo `buckets` (the same in
    every process, and as `zlib.crc32` places it)."""
    if buckets == 1:
        return np.zeros(len(tokens), dtype=np.int64)
    return (crc32(tokens) % np.uint32(buckets)).astype(np.int64)


def into_buckets(table: pa.Table, buckets: int) -> dict[int, pa.Table]:
    """The rows of `table` by the bucket of their token; buckets without rows left out."""
    if table.num_rows == 0:
        return {}
    return by_key(table, bucket_of(table["token"], buckets))


def canonical(table: pa.Table) -> pa.Table:
    """`table` in the order `(-count, token)` (Arrow compares strings by their UTF-8
    bytes, which is Python's code-point order)."""
    return table.sort_by(CANONICAL).combine_chunks()


def joined(first: pa.Table, second: pa.Table) -> pa.Table:
    """Two sides' canonical counts as one canonical table: the few tokens both sides
    have are summed, and the rest, already in order, sorted as the two runs they are
    (several times cheaper than sorting the summed whole)."""
    small, large = sorted((first, second), key=lambda t: t.num_rows)
    in_large = pc.is_in(large["token"], value_set=small["token"].combine_chunks())
    shared = large.filter(in_large)
    if shared.num_rows == 0:
        return canonical(pa.concat_tables([first, second]))
    in_small = pc.is_in(small["token"], value_set=shared["token"].combine_chunks())
    summed = sum_counts([shared, small.filter(in_small)])
    rest = [large.filter(pc.invert(in_large)), small.filter(pc.invert(in_small))]
    return canonical(pa.concat_tables([*rest, summed]))


def char_counts(table: pa.Table) -> dict[str, int]:
    """How often each character occurs in the counted tokens: T2T's alphabet, weighted.

    Computed over the code points of all tokens at once: each code point weighted by
    its token's count and summed with one `bincount` (float64 sums of integers are exact
    below 2**53 characters of text)."""
    if table.num_rows == 0:
        return {}
    tokens = table["token"].combine_chunks()
    lengths = pc.utf8_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64)
    points = np.frombuffer(utf8_text(tokens).encode("utf-32-le", "surrogatepass"), np.uint32)
    if points.size == 0:
        return {}
    weights = np.repeat(table["count"].to_numpy().astype(np.float64), lengths)
    sums = np.bincount(points, weights=weights)
    present = np.flatnonzero(sums)
    chars = present.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
    return dict(zip(chars, np.rint(sums[present]).astype(np.int64).tolist(), strict=True))


def write_counts(url: str, table: pa.Table) -> WrittenFile:
    """Counts, in canonical order already (`canonical`), as a Parquet file."""
    return fsio.write_parquet(url, table.select(COUNTS_SCHEMA.names))


def write_chars(url: str, per_side: Mapping[str, Mapping[str, int]]) -> WrittenFile:
    sides, chars, counts = [], [], []
    for side in sorted(per_side):
        for char, count in sorted(per_side[side].items(), key=lambda cc: (-cc[1], cc[0])):
            sides.append(side)
            chars.append(char)
            counts.append(count)
    table = pa.table({"side": sides, "char": chars, "count": counts}, schema=CHARS_SCHEMA)
    return fsio.write_parquet(url, table)


class CountFile(NamedTuple):
    """A count file as its prepare manifest lists it: the output's root and the entry."""

    root: str
    entry: Mapping[str, Any]


def count_files(root: str, prepared: Mapping[str, Any], side: str) -> tuple[list[CountFile], int]:
    """A side's count files in a committed `prepare` manifest, and their rows."""
    entries = {f["path"]: f for f in prepared["files"]}
    paths = prepared["counts"][side]
    return [CountFile(root, entries[p]) for p in paths], sum(entries[p]["rows"] for p in paths)


def count_batches(files: Iterable[CountFile]) -> Iterator[pa.RecordBatch]:
    """The rows of count files, a record batch at a time, each file's sha256 checked as
    it is read (an IntegrityError naming it otherwise)."""
    for source in files:
        yield from manifest.iter_parquet_entry(source.root, source.entry, COUNTS_SCHEMA.names)


def read_counts(files: Iterable[CountFile]) -> dict[str, int]:
    """All counts of count files as a dict: for tests and small data only (it holds
    every distinct token)."""
    out: dict[str, int] = {}
    for batch in count_batches(files):
        out.update(zip(batch["token"].to_pylist(), batch["count"].to_pylist(), strict=True))
    return out


def read_alphabet(root: str, prepared: Mapping[str, Any], side: str) -> str:
    """Every character of a side's counted tokens (`counts/chars.parquet`), as one string
    in code-point order."""
    entries = {f["path"]: f for f in prepared["files"]}
    entry = entries[prepared["counts"]["chars"]]
    table = manifest.read_parquet_entry(root, entry, ["side", "char"])
    return "".join(sorted(table.filter(pc.equal(table["side"], side))["char"].to_pylist()))
