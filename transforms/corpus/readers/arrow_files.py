"""Parquet and Arrow files of pairs, read a row group or a record batch at a time.

Parquet files are planned by their footers: a `TableRef` names consecutive row groups of
about a chunk's rows (a larger row group, as `datasets` writes 100 MB of rows to one, on
its own), and the worker that cleans it reads just those, in batches of a chunk's rows,
so that no corpus text passes through a shuffle. Arrow IPC streams and files
(`save_to_disk` writes streams) are planned from their messages' headers
(`arrow_messages.py`) as byte ranges of whole record batches, each read by the worker
that cleans it; one with dictionary-encoded columns is streamed where it is planned, as a
range of it would need the dictionaries before it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from nmtpipe.transforms.corpus.base import TableReader
from nmtpipe.transforms.corpus.fields import Tree
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import RawChunk
from nmtpipe.transforms.corpus.readers import arrow_messages
from nmtpipe.transforms.corpus.readers.lines import opened
from nmtpipe.transforms.corpus.records import schema_tree, table_chunk
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.storage import fsio

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, OSError)


class TableRef(NamedTuple):
    """Row groups `parts` of Parquet table `inp`, whose first row is record
    `first_row`, read `batch_rows` at a time."""

    inp: CorpusInput
    parts: tuple[int, int]
    first_row: int
    batch_rows: int


class ArrowRef(NamedTuple):
    """Record batches `batches` of the Arrow file `inp`, whose schema message is at bytes
    `schema` and whose first row is record `first_row`, read `batch_rows` at a time."""

    inp: CorpusInput
    schema: tuple[int, int]
    batches: arrow_messages.Batches
    first_row: int
    batch_rows: int


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


def _plan_parquet(inp: CorpusInput, chunk_rows: int) -> Iterator[TableRef]:
    """Refs to consecutive row groups of about `chunk_rows` rows each, from the footer; a
    larger row group is a ref of its own (a ref to a part of one would decode all that
    precedes it), read `chunk_rows` at a time by the worker that loads it."""
    with _opened(inp.src) as f:
        meta = pq.ParquetFile(f).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    start, first, rows = 0, 1, 0
    for k, size in enumerate(sizes):
        if size > chunk_rows and rows:
            yield TableRef(inp, (start, k), first, chunk_rows)
            start, first, rows = k, first + rows, 0
        rows += size
        if rows >= chunk_rows or k == len(sizes) - 1:
            yield TableRef(inp, (start, k + 1), first, chunk_rows)
            start, first, rows = k + 1, first + rows, 0


def _arrow_batches(reader: Any) -> Iterator[pa.RecordBatch]:
    if isinstance(reader, pa.ipc.RecordBatchFileReader):
        return (reader.get_batch(i) for i in range(reader.num_record_batches))
    return iter(reader)


def _columns(inp: CorpusInput) -> list[str]:
    """The top-level columns the fields are in."""
    assert inp.fields is not None
    return sorted({path.split(".", 1)[0] for path in inp.fields})


def _stream_chunks(
    inp: CorpusInput, batches: Iterator[pa.RecordBatch], chunk_rows: int, first: int
) -> Iterator[RawChunk]:
    """Rows of record batches, `chunk_rows` to a chunk; the first is record `first`."""
    assert inp.fields is not None
    pending: list[pa.RecordBatch] = []
    rows = 0
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


def _load_parquet(ref: TableRef) -> Iterator[RawChunk]:
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


class ParquetReader(TableReader):
    """Parquet files, planned from their footers."""

    NAME = "parquet"
    SUFFIXES = (".parquet", ".pq")
    COMPRESSIBLE = False
    INFLATION = 4  # its pages are compressed
    SPLIT = "row groups of about a chunk's rows, read by the workers that clean them"

    def fields(self, inp: CorpusInput) -> Tree:
        with _opened(inp.src) as f:
            return dict(schema_tree(pq.ParquetFile(f).schema_arrow))

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[TableRef]:
        return _plan_parquet(inp, chunk_lines)

    def load(self, piece: Any) -> Iterator[RawChunk]:
        return _load_parquet(piece)


def _plan_arrow(inp: CorpusInput, chunk_rows: int) -> Iterator[ArrowRef]:
    """Refs to runs of whole record batches of about `chunk_rows` rows, from the headers."""
    with opened(inp.src) as f:
        found = arrow_messages.messages(f, fsio.size(inp.src), inp.src)
        schema = arrow_messages.schema_range(found, inp.src)
        first = 1
        for run in arrow_messages.batch_runs(found, chunk_rows, inp.src):
            yield ArrowRef(inp, schema, run, first, chunk_rows)
            first += run.rows


def _load_arrow(ref: ArrowRef) -> Iterator[RawChunk]:
    """The rows an ArrowRef names: its schema, its batches and an end, as one stream."""
    (schema_start, schema_end), (start, end, _) = ref.schema, ref.batches
    with opened(ref.inp.src) as f:
        f.seek(schema_start)
        schema = f.read(schema_end - schema_start)
        f.seek(start)
        batches = f.read(end - start)
    stream = pa.py_buffer(b"".join((schema, batches, arrow_messages.END_OF_STREAM)))
    try:
        reader = pa.ipc.open_stream(stream)
    except _ARROW_ERRORS as e:
        raise InputError(f"cannot read {ref.inp.src}: {e}") from e
    yield from _stream_chunks(ref.inp, reader, ref.batch_rows, ref.first_row)


def _dictionaries(schema: pa.Schema) -> list[str]:
    return [field.name for field in schema if pa.types.is_dictionary(field.type)]


class ArrowReader(TableReader):
    """Arrow IPC files and streams (`Dataset.save_to_disk`'s), planned from their
    messages' headers."""

    NAME = "arrow"
    SUFFIXES = (".arrow", ".feather")
    COMPRESSIBLE = False
    SPLIT = (
        "runs of whole record batches, found from their headers, read by the workers that "
        "clean them; streamed by one where a column is dictionary-encoded"
    )

    def whole(self, inp: CorpusInput) -> str | None:
        with _arrow_reader(inp.src) as reader:
            names = _dictionaries(reader.schema)
        return f"dictionary-encoded columns ({', '.join(names)})" if names else None

    def fields(self, inp: CorpusInput) -> Tree:
        with _arrow_reader(inp.src) as reader:
            return dict(schema_tree(reader.schema))

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[ArrowRef | RawChunk]:
        if not self.whole(inp):
            yield from _plan_arrow(inp, chunk_lines)
            return
        with _arrow_reader(inp.src) as reader:
            yield from _stream_chunks(inp, _arrow_batches(reader), chunk_lines, 1)

    def load(self, piece: Any) -> Iterator[RawChunk]:
        return _load_arrow(piece) if isinstance(piece, ArrowRef) else iter((piece,))
