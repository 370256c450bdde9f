"""The records `prepare` makes of a corpus: kept pairs and rejects, as Arrow.

Kept pairs leave the cleaning stage as Arrow record batches (one per chunk and
shard) in `WIRE_SCHEMA`, where the origin, the same for a whole chunk, is
dictionary-encoded; the shard writers store them in `PAIRS_SCHEMA`. A valid or test
pair whose text normalisation changed also keeps the lines as they were read
(`src_raw`/`tgt_raw`, null where nothing changed, always null in train): scores are
computed against the references the user gave. A `Reject` keeps the raw bytes of a line
that did not make it, with where it came from and why.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.text.string_hash import crc32

PAIRS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("src", pa.string()),
        ("tgt", pa.string()),
        ("origin", pa.string()),
        ("line", pa.int64()),
        ("src_raw", pa.string()),
        ("tgt_raw", pa.string()),
    ]
)
RAW = ("src_raw", "tgt_raw")  # valid and test: the lines as read, where normalising changed them
# A shard's row order: by id, then text, origin and line (`formats/pair_shards.py`).
SORT_KEYS = [(name, "ascending") for name in ("id", "src", "tgt", "origin", "line")]
WIRE_SCHEMA = PAIRS_SCHEMA.set(3, pa.field("origin", pa.dictionary(pa.int32(), pa.string())))
SCORES = pa.map_(pa.string(), pa.float32())  # a pair's scores by scorer column
REJECTS_SCHEMA = pa.schema(
    [
        ("origin", pa.string()),
        ("line", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("src", pa.binary()),
        ("tgt", pa.binary()),
        # A pair the shard writers rejected: its id and its scores (null before them),
        # and in valid and test the lines as read where normalisation changed them.
        ("id", pa.int64()),
        ("scores", SCORES),
        ("src_raw", pa.string()),
        ("tgt_raw", pa.string()),
    ]
)


class Reject(NamedTuple):
    """A line that did not make it, with where it came from and why.

    `src`/`tgt` are the bytes of the two sides as read (line ending removed); for a TSV
    line with too few columns, `src` is the whole line and `tgt` is None. What the shard
    writers reject (duplicates, overlap, near-duplicates, low scores) carries the
    normalised text of the pair, its `id`, its `scores` (`(column, score)` items) and
    its `src_raw`/`tgt_raw` (`PAIRS_SCHEMA`), so that it can be kept again without
    reading the corpus.
    """

    origin: str
    line: int
    reason: str
    detail: str
    src: bytes | None
    tgt: bytes | None
    id: int | None = None
    scores: list[tuple[str, float]] | None = None
    src_raw: str | None = None
    tgt_raw: str | None = None


def pair_batch(
    origin: str,
    ids: pa.Array,
    src: list[str],
    tgt: list[str],
    lines: pa.Array,
    raw: tuple[list[str | None], list[str | None]] | None = None,
) -> pa.RecordBatch:
    """Kept pairs of one chunk as a record batch in WIRE_SCHEMA (`raw`: the lines as
    read where normalisation changed them, else None; all None if not given)."""
    origins = pa.DictionaryArray.from_arrays(
        pa.nulls(len(src), pa.int32()).fill_null(0), pa.array([origin])
    )
    src_raw, tgt_raw = raw or ([None] * len(src), [None] * len(src))
    columns = [ids, pa.array(src, pa.string()), pa.array(tgt, pa.string()), origins, lines]
    columns += [pa.array(src_raw, pa.string()), pa.array(tgt_raw, pa.string())]
    return pa.RecordBatch.from_arrays(columns, schema=WIRE_SCHEMA)


def reject_batch(rejects: list[Reject]) -> pa.RecordBatch:
    """Rejects as a record batch in REJECTS_SCHEMA."""
    return pa.RecordBatch.from_pydict(
        {name: [getattr(r, name) for r in rejects] for name in REJECTS_SCHEMA.names},
        schema=REJECTS_SCHEMA,
    )


def reject_rows(
    table: pa.Table,
    rows: np.ndarray,
    reason: str,
    detail: pa.Array | str | list[str],
    scores: pa.Array | None = None,
) -> pa.Table:
    """Rows `rows` of a pairs table as rejects in REJECTS_SCHEMA, their normalised text
    as the bytes (what the shard writers reject a pair with), with their ids, their
    lines as read where the table has them and, given, their scores (SCORES, one per
    row)."""
    picked = table.take(pa.array(rows, pa.int64()))
    n = picked.num_rows
    if isinstance(detail, str):
        detail = [detail] * n
    details = pa.array(detail, pa.string()) if isinstance(detail, list) else detail
    columns = [
        picked["origin"].cast(pa.string()),
        picked["line"],
        pa.array([reason] * n, pa.string()),
        details,
        picked["src"].cast(pa.binary()),
        picked["tgt"].cast(pa.binary()),
        picked["id"],
        pa.nulls(n, SCORES) if scores is None else scores,
        *(picked[raw] if raw in picked.column_names else pa.nulls(n, pa.string()) for raw in RAW),
    ]
    return pa.Table.from_arrays(columns, schema=REJECTS_SCHEMA)


def locations(origins: pa.Array | pa.ChunkedArray, lines: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`origin:line` of each row, as rejects and their details name a line."""
    return pc.binary_join_element_wise(origins, pc.cast(lines, pa.string()), ":")


def by_key(table: pa.Table, keys: np.ndarray) -> dict[int, pa.Table]:
    """The rows of `table` grouped by an integer key per row (row order kept within a
    group); keys without rows left out."""
    if table.num_rows == 0:
        return {}
    order = np.argsort(keys, kind="stable")
    table = table.take(pa.array(order))
    present, starts = np.unique(keys[order], return_index=True)
    ends = [*starts[1:].tolist(), table.num_rows]
    return {
        int(k): table.slice(s, e - s)
        for k, s, e in zip(present.tolist(), starts, ends, strict=True)
    }


def reject_shards(rejects: pa.Table, shards: int) -> dict[int, pa.Table]:
    """Rejects by the shard of their location: `zlib.crc32` of `origin:line`."""
    where = locations(rejects["origin"], rejects["line"])
    return by_key(rejects, (crc32(where) % np.uint32(shards)).astype(np.int64))


def utf8_text(strings: pa.Array | pa.ChunkedArray) -> str:
    """The strings of an Arrow string array concatenated, decoded once from its UTF-8
    buffer (no Python string per element)."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    strings = strings.cast(pa.string())
    if len(strings) == 0:
        return ""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)
    first, last = int(offsets[strings.offset]), int(offsets[strings.offset + len(strings)])
    data = strings.buffers()[2]
    return "" if data is None else memoryview(data)[first:last].tobytes().decode("utf-8")
