"""Parquet and Arrow files of pairs, read a row group or a record batch at a time.

Parquet files are planned by their footers: a `TableRef` names consecutive row groups of
about a chunk's rows, and the worker that cleans it reads just those, in batches of a
chunk's rows, so that no corpus text passes through a shuffle. An Arrow file (`datasets`'
`save_to_disk` writes IPC streams) says how many rows its batches hold only by reading
them: it is read in one pass, where it is planned, into chunks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats.corpus.records import schema_tree, table_chunk
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.inputs import PARQUET, CorpusInput
from nmtpipe.transforms.storage.raw_corpus import RawChunk

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, OSError)


class TableRef(NamedTuple):
    """Row groups `parts` of Parquet table `inp`, whose first row is record
    `first_row`, read `batch_rows` at a time."""

    inp: CorpusInput
    parts: tuple[int, int]
    first_row: int
    batch_rows: int

    @property
    def origin(self) -> str:
        return self.inp.origin

    @property
    def first_line(self) -> int:
        return self.first_row


@contextlib.contextmanager
def _opened(url: str) -> Iterator[Any]:
    try:
        with fsio.open_for_arrow(url) as f:
            yield f
    except FileNotFoundError as e:
        raise InputError(f"no such file: {url}") from e
    except _ARROW_ERRORS as e:
        raise InputError(f"cannot read {url}: {e}") from e


@contextlib.contextmanager
def _arrow_reader(url: str) -> Iterator[Any]:
    """An Arrow IPC file's reader, or a stream's when it is one."""
    with _opened(url) as f:
        try:
            reader: Any = pa.ipc.open_file(f)
        except pa.ArrowInvalid:
            f.seek(0)
            reader = pa.ipc.open_stream(f)
        yield reader


def schema_of(inp: CorpusInput) -> pa.Schema:
    """The schema of a Parquet or Arrow table (its footer or first message only)."""
    if inp.layout == PARQUET:
        with _opened(inp.src) as f:
            return pq.ParquetFile(f).schema_arrow
    with _arrow_reader(inp.src) as reader:
        return reader.schema


def plan(inp: CorpusInput, chunk_rows: int) -> Iterator[TableRef | RawChunk]:
    """The chunks of a Parquet or Arrow table: refs to row groups of about `chunk_rows`
    rows each, or an Arrow file's rows read into chunks."""
    if inp.layout == PARQUET:
        with _opened(inp.src) as f:
            meta = pq.ParquetFile(f).metadata
            sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        yield from _group(inp, sizes, chunk_rows)
        return
    with _arrow_reader(inp.src) as reader:
        yield from _stream_chunks(inp, reader, chunk_rows)


def _group(inp: CorpusInput, sizes: list[int], chunk_rows: int) -> Iterator[TableRef]:
    """Consecutive parts of about `chunk_rows` rows together (a larger part alone)."""
    start = rows = 0
    first = 1
    for k, size in enumerate(sizes):
        rows += size
        if rows >= chunk_rows or k == len(sizes) - 1:
            if rows:
                yield TableRef(inp, (start, k + 1), first, chunk_rows)
            first += rows
            start, rows = k + 1, 0


def _columns(inp: CorpusInput) -> list[str]:
    """The top-level columns the fields are in."""
    assert inp.fields is not None
    return sorted({path.split(".", 1)[0] for path in inp.fields})


def _stream_chunks(inp: CorpusInput, reader: Any, chunk_rows: int) -> Iterator[RawChunk]:
    assert inp.fields is not None
    pending: list[pa.RecordBatch] = []
    rows, first = 0, 1
    if isinstance(reader, pa.ipc.RecordBatchFileReader):
        batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
    else:
        batches = iter(reader)
    for batch in _batches(batches, inp.src):
        pending.append(batch)
        rows += batch.num_rows
        while rows >= chunk_rows:
            table = pa.Table.from_batches(pending)
            yield table_chunk(inp, first, table.slice(0, chunk_rows), inp.fields)
            first += chunk_rows
            rest = table.slice(chunk_rows)
            pending, rows = rest.to_batches(), rest.num_rows
    if rows:
        yield table_chunk(inp, first, pa.Table.from_batches(pending), inp.fields)


def _batches(reader: Any, url: str) -> Iterator[pa.RecordBatch]:
    try:
        yield from reader
    except _ARROW_ERRORS as e:
        raise InputError(f"cannot read {url}: {e}") from e


def load(ref: TableRef) -> Iterator[RawChunk]:
    """The rows a TableRef names, `batch_rows` at a time."""
    inp = ref.inp
    assert inp.fields is not None
    first = ref.first_row
    with _opened(inp.src) as f:
        batches = pq.ParquetFile(f).iter_batches(
            batch_size=ref.batch_rows, row_groups=range(*ref.parts), columns=_columns(inp)
        )
        for batch in _batches(batches, inp.src):
            if batch.num_rows:
                yield table_chunk(inp, first, batch, inp.fields)
                first += batch.num_rows


def tree(inp: CorpusInput) -> dict:
    """The table's schema as `fields.Tree`."""
    return dict(schema_tree(schema_of(inp)))
