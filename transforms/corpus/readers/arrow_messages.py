"""Where the record batches of an Arrow IPC stream or file lie, read from their message
headers alone, so that an Arrow file is planned as byte ranges of whole batches without
reading its text (as Parquet is from its footer).

An IPC stream is a sequence of messages, each a little-endian length prefix, a
FlatBuffers `Message` (its kind, its body's length and, for a record batch, its rows)
and a body; an IPC file is the same stream between a magic string and a footer
(Arrow's columnar format, "Serialization and Interprocess Communication"). pyarrow reads
a message only with its body, so the few fields needed are read from the FlatBuffers
table here. A range of batches is read back by giving Arrow's stream reader the schema
message, the range and the end-of-stream marker.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from nmtpipe.transforms.errors import InputError

FILE_MAGIC = b"ARROW1"
END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"
_CONTINUATION = 0xFFFFFFFF
_SCHEMA, _DICTIONARY, _RECORD_BATCH = 1, 2, 3  # `MessageHeader`'s union tags
_HEAD = 4096  # bytes read at a message's start: its prefix and metadata, as a rule

_U8, _U16, _U32, _I32, _I64 = (struct.Struct(f) for f in ("<B", "<H", "<I", "<i", "<q"))


class Message(NamedTuple):
    """One message: its kind, where it starts and ends, and a record batch's rows."""

    kind: int
    start: int
    end: int
    rows: int


class _Table(NamedTuple):
    """A FlatBuffers table at `pos` of `buf`; fields by their index in the schema."""

    buf: bytes
    pos: int

    def _offset(self, index: int) -> int:
        vtable = self.pos - _I32.unpack_from(self.buf, self.pos)[0]
        at = 4 + 2 * index  # past the vtable's own size and its table's
        if at >= _U16.unpack_from(self.buf, vtable)[0]:
            return 0  # a field newer than the writer: its default
        return _U16.unpack_from(self.buf, vtable + at)[0]

    def scalar(self, index: int, kind: struct.Struct) -> int:
        offset = self._offset(index)
        return kind.unpack_from(self.buf, self.pos + offset)[0] if offset else 0

    def table(self, index: int) -> _Table | None:
        offset = self._offset(index)
        if not offset:
            return None
        at = self.pos + offset
        return _Table(self.buf, at + _U32.unpack_from(self.buf, at)[0])


def _parse(metadata: bytes) -> tuple[int, int, int]:
    """A `Message`'s kind, body length and (a record batch's) rows: fields 1 (the
    header's type), 2 (the header) and 3 (`bodyLength`); `RecordBatch.length` is 0."""
    message = _Table(metadata, _U32.unpack_from(metadata, 0)[0])
    kind, body = message.scalar(1, _U8), message.scalar(3, _I64)
    header = message.table(2) if kind == _RECORD_BATCH else None
    return kind, body, header.scalar(0, _I64) if header else 0


def messages(f: BinaryIO, size: int, url: str) -> Iterator[Message]:
    """The messages of the IPC stream or file `f` of `size` bytes, up to its end of
    stream, each read from its first bytes only."""
    f.seek(0)
    pos = 8 if f.read(len(FILE_MAGIC)) == FILE_MAGIC else 0
    while pos < size:
        f.seek(pos)
        head = f.read(_HEAD)
        try:
            length, skip = _U32.unpack_from(head, 0)[0], 4
            if length == _CONTINUATION:
                length, skip = _U32.unpack_from(head, 4)[0], 8
            if length == 0:
                return
            if skip + length > len(head):
                head += f.read(skip + length - len(head))
            kind, body, rows = _parse(head[skip : skip + length])
        except struct.error as e:
            raise InputError(f"{url}: not an Arrow IPC message at byte {pos}: {e}") from e
        end = pos + skip + length + body
        if body < 0 or end > size:
            raise InputError(f"{url}: the Arrow message at byte {pos} runs past the file's end")
        yield Message(kind, pos, end, rows)
        pos = end


class Batches(NamedTuple):
    """Consecutive record batches at bytes [start, end), `rows` in all."""

    start: int
    end: int
    rows: int


def batch_runs(found: Iterator[Message], rows_each: int, url: str) -> Iterator[Batches]:
    """Runs of consecutive record batches of about `rows_each` rows (a larger batch on its
    own), after the schema; refused where a dictionary message lies between them, as a
    range would then need the dictionaries read before it."""
    run: Batches | None = None
    for message in found:
        if message.kind == _DICTIONARY:
            raise InputError(f"{url}: dictionary batches cannot be read in ranges")
        if message.kind != _RECORD_BATCH:
            continue
        if run and message.rows > rows_each:
            yield run
            run = None
        start, rows = (run.start, run.rows) if run else (message.start, 0)
        run = Batches(start, message.end, rows + message.rows)
        if run.rows >= rows_each:
            yield run
            run = None
    if run:
        yield run


def schema_range(found: Iterator[Message], url: str) -> tuple[int, int]:
    """The bytes of the first message, which must be the schema."""
    first = next(found, None)
    if first is None or first.kind != _SCHEMA:
        raise InputError(f"{url}: an Arrow IPC stream starts with its schema")
    return first.start, first.end
