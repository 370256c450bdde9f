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

import pyarrow as pa

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
