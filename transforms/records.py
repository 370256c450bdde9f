"""The records `prepare` produces, their Arrow schemas, and how batches travel in Beam.

Kept pairs move from the cleaning stage to the shard writers as Arrow record batches,
one per chunk and shard, in one of two ways:

- inline: the batch as Arrow IPC bytes, a single element Beam's coders pass through
  untouched (the right choice where the runner's shuffle is a service: Dataflow, Flink);
- spilled: the cleaning stage writes all batches of a chunk to one Arrow IPC file in a
  spill directory and only a `SpillRef` goes through the shuffle. Local runners move
  shuffled data through Python in one process (about 30 MB/s on the FnApiRunner);
  files on the local disk are far faster and keep that process's memory flat.

Either way the shard writer concatenates batches without a Python object per pair.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import pyarrow as pa

from transforms import storage

PAIRS_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("src", pa.string()),
        ("tgt", pa.string()),
        ("origin", pa.string()),
        ("line", pa.int64()),
    ]
)
# On the wire the origin, the same for a whole chunk, is dictionary-encoded.
WIRE_SCHEMA = PAIRS_SCHEMA.set(3, pa.field("origin", pa.dictionary(pa.int32(), pa.string())))
REJECTS_SCHEMA = pa.schema(
    [
        ("origin", pa.string()),
        ("line", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("src", pa.binary()),
        ("tgt", pa.binary()),
    ]
)


class Reject(NamedTuple):
    """A line that did not make it, with where it came from and why.

    `src`/`tgt` are the bytes of the two sides as read (line ending removed); for a TSV
    line with too few columns, `src` is the whole line and `tgt` is None. Duplicates
    carry the normalised text of the pair they repeat.
    """

    origin: str
    line: int
    reason: str
    detail: str
    src: bytes | None
    tgt: bytes | None


class SpillRef(NamedTuple):
    """Batch `index` of the Arrow IPC file at `url`."""

    url: str
    index: int


def pair_batch(
    origin: str, ids: pa.Array, src: list[str], tgt: list[str], lines: pa.Array
) -> pa.RecordBatch:
    """Kept pairs of one chunk as a record batch in WIRE_SCHEMA."""
    origins = pa.DictionaryArray.from_arrays(
        pa.nulls(len(src), pa.int32()).fill_null(0), pa.array([origin])
    )
    return pa.RecordBatch.from_arrays(
        [ids, pa.array(src, pa.string()), pa.array(tgt, pa.string()), origins, lines],
        schema=WIRE_SCHEMA,
    )


def inline(batch: pa.RecordBatch) -> bytes:
    """`batch` as Arrow IPC stream bytes."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, WIRE_SCHEMA) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def spill(url: str, batches: list[pa.RecordBatch]) -> list[SpillRef]:
    """Write `batches` to one Arrow IPC file at `url` (atomically); refs to each."""
    sink = pa.BufferOutputStream()
    unified = pa.ipc.IpcWriteOptions(unify_dictionaries=True)  # the file format needs one
    with pa.ipc.new_file(sink, WIRE_SCHEMA, options=unified) as writer:
        writer.write_table(pa.Table.from_batches(batches, WIRE_SCHEMA))
    storage.write_bytes(url, sink.getvalue())
    return [SpillRef(url, i) for i in range(len(batches))]


def _resolve(item: bytes | SpillRef) -> pa.Table:
    if isinstance(item, bytes):
        return pa.ipc.open_stream(item).read_all()
    fs, path = storage.url_to_fs(item.url)
    with fs.open(path, "rb") as f:
        return pa.Table.from_batches([pa.ipc.open_file(f).get_batch(item.index)])


def pairs_table(items: Iterable[bytes | SpillRef]) -> pa.Table:
    """The pairs of many inline or spilled batches as one table in PAIRS_SCHEMA."""
    tables = [_resolve(item) for item in items]
    if not tables:
        return PAIRS_SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    return table.set_column(3, "origin", table["origin"].cast(pa.string()))


def rejects_table(rejects: Iterable[Reject]) -> pa.Table:
    """Rejects sorted by (origin, line, reason), as a table in REJECTS_SCHEMA."""
    rows = sorted(rejects, key=lambda r: (r.origin, r.line, r.reason))
    return pa.table(
        {name: [getattr(r, name) for r in rows] for name in REJECTS_SCHEMA.names},
        schema=REJECTS_SCHEMA,
    )
