"""How batches of pairs and rejects travel through a Beam shuffle: inline or spilled.

Kept pairs move from the cleaning stage to the shard writers as Arrow record batches,
one per chunk and shard, in one of two ways:

- inline: the batch as Arrow IPC bytes, a single element Beam's coders pass through
  untouched (the right choice where the runner's shuffle is a service: Dataflow, Flink);
- spilled: the cleaning stage writes all batches of a chunk to one Arrow IPC file in a
  spill directory and only a `SpillRef` goes through the shuffle. Local runners move
  shuffled data through Python in one process (about 30 MB/s on the FnApiRunner);
  files on the local disk are far faster and keep that process's memory flat.

Either way the shard writer concatenates batches without a Python object per pair.

Python objects that grow with the corpus travel the same two ways (`ship_object`):
what the valid and test pairs protect, as the partial results of its combine and as the
side input every shard writer reads (once per worker process). The FnApiRunner moves
both through its own process, copying a side input to every bundle that asks for it: at
4M pairs (a 15 MB set) that process held about 250 MB more (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

import pyarrow as pa

from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.text.records import REJECTS_SCHEMA, WIRE_SCHEMA

K = TypeVar("K")


class SpillRef(NamedTuple):
    """Batch `index` of the Arrow IPC file at `url`."""

    url: str
    index: int


Shipped = bytes | SpillRef


def inline(batch: pa.RecordBatch) -> bytes:
    """`batch` as Arrow IPC stream bytes."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def spill(url: str, batches: list[pa.RecordBatch]) -> list[SpillRef]:
    """Write `batches` (one schema) to one Arrow IPC file at `url`, atomically; refs."""
    schema = batches[0].schema
    sink = pa.BufferOutputStream()
    unified = pa.ipc.IpcWriteOptions(unify_dictionaries=True)  # the file format needs one
    with pa.ipc.new_file(sink, schema, options=unified) as writer:
        writer.write_table(pa.Table.from_batches(batches, schema))
    fsio.write_bytes(url, sink.getvalue())
    return [SpillRef(url, i) for i in range(len(batches))]


def spill_url(spill_dir: str | None, name: str) -> str | None:
    """A file in the spill directory named after `name` (retries overwrite it)."""
    if spill_dir is None:
        return None
    digest = hashlib.blake2b(name.encode(), digest_size=12).hexdigest()
    return fsio.join(spill_dir, f"{digest}.arrow")


def ship(keyed: dict[K, pa.RecordBatch], spill_url: str | None) -> Iterator[tuple[K, Shipped]]:
    """(key, batch) pairs ready for a shuffle: inline, or spilled to one file at `spill_url`."""
    keys = sorted(keyed)
    if spill_url is None:
        yield from ((k, inline(keyed[k])) for k in keys)
    elif keys:
        yield from zip(keys, spill(spill_url, [keyed[k] for k in keys]), strict=True)


def receive_table(item: Shipped) -> pa.Table:
    """The batch `ship` shipped as `item`, as a table."""
    if isinstance(item, bytes):
        return pa.ipc.open_stream(item).read_all()
    with fsio.open_for_arrow(item.url) as f:
        return pa.Table.from_batches([pa.ipc.open_file(f).get_batch(item.index)])


def one_batch(table: pa.Table) -> pa.RecordBatch:
    """The rows of a non-empty `table` as one record batch."""
    return table.combine_chunks().to_batches()[0]


def _gather(items: Iterable[Shipped], schema: pa.Schema) -> pa.Table:
    tables = [receive_table(item) for item in items]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def pairs_table(items: Iterable[Shipped]) -> pa.Table:
    """The pairs of many shipped pair batches as one table in PAIRS_SCHEMA."""
    table = _gather(items, WIRE_SCHEMA)
    return table.set_column(3, "origin", table["origin"].cast(pa.string()))


def rejects_table(items: Iterable[Shipped]) -> pa.Table:
    """The rejects of many shipped reject batches, sorted by (origin, line, reason)."""
    keys = [("origin", "ascending"), ("line", "ascending"), ("reason", "ascending")]
    return _gather(items, REJECTS_SCHEMA).sort_by(keys)


def ship_object(value: Any, spill_dir: str | None) -> Any:
    """A Python object ready for the runner: `value` itself, or pickled into a new file
    of `spill_dir` (atomically) and referred to by a `SpillRef`."""
    if spill_dir is None:
        return value
    url = fsio.join(spill_dir, f"object-{uuid.uuid4().hex}.pickle")
    fsio.write_bytes(url, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return SpillRef(url, 0)


def receive_object(item: Any) -> Any:
    """What `ship_object` shipped."""
    return _read_object(item.url) if isinstance(item, SpillRef) else item


def side_input(item: Any) -> Any:
    """What `ship_object` shipped as a side input: a spilled one is read once per process
    (every bundle of a stage asks for it again)."""
    return _read_side_input(item.url) if isinstance(item, SpillRef) else item


def _read_object(url: str) -> Any:
    # Only files of this run's own spill directory are ever read here.
    return pickle.loads(fsio.read_bytes(url))


_read_side_input = functools.lru_cache(maxsize=4)(_read_object)
