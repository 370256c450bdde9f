"""Line-aligned text files, a pair (`train.en`, `train.zh`) or one TSV file: plain files
on any filesystem that reads byte ranges are planned from their line ends and read by
the workers that clean them; other streams are read where they are planned.

A plain file on disk or in an object store (`RANGED`) is only scanned for line ends
(`plan_chunks`, at memory speed with numpy): the chunks travel as byte ranges
(`ChunkRef`) and each worker reads its own, so no corpus text passes through a shuffle
(the planner still reads each file once, for its line ends). Compressed files, archive
members and files on filesystems that cannot read a byte range (HTTP) cannot be split:
one worker streams them (`raw_corpus.read_chunks`), holding a chunk at a time.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, BinaryIO, ClassVar, NamedTuple

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import infer_compression

from nmtpipe.transforms.corpus.base import Reader
from nmtpipe.transforms.corpus.inputs import CorpusInput, split_archive_url
from nmtpipe.transforms.corpus.raw_corpus import (
    BLOCK_SIZE,
    CHUNK_BYTES,
    MAX_RECORD_BYTES,
    UTF8_BOM,
    RawChunk,
    found_encoding,
    lines_chunk,
    read_block,
    read_chunks,
    read_head,
    split_lines,
    take_lines,
)
from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.encodings import UTF8

# fsspec's protocols whose files are read by byte range, as plain local files are.
RANGED = {"s3", "s3a", "gs", "gcs", "memory", "abfs", "az"}


class ChunkRef(NamedTuple):
    """A chunk of plain files as byte ranges `(url, start, end)`; see `load_chunks`."""

    origin: str
    role: str
    first_line: int
    src: tuple[str, int, int]
    tgt: tuple[str, int, int] | None
    columns: tuple[int, int]
    encodings: tuple[str, str] = (UTF8, UTF8)


def _is_ranged(url: str) -> bool:
    """Whether `url` is a plain file on a filesystem that reads byte ranges (local disk,
    an object store, memory), which workers can read a range of each."""
    if split_archive_url(url) is not None or "::" in url or infer_compression(url) is not None:
        return False
    fs, _ = fsspec.core.url_to_fs(url)
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return isinstance(fs, LocalFileSystem) or bool(protocols & RANGED)


def _found_encoding(url: str, wanted: str) -> str:
    with fsspec.open(url, "rb") as f:
        head = read_head(f, url)
    return found_encoding(url, wanted, head, len(head) < encodings.SAMPLE_BYTES)


def _chunk_ends(url: str, chunk_lines: int) -> tuple[list[int], int]:
    """Byte offsets just past every `chunk_lines`-th line (and the end), and the line count."""
    ends: list[int] = []
    lines = offset = 0
    last = b"\n"
    with fsspec.open(url, "rb") as f:
        while block := f.read(BLOCK_SIZE * 4):
            newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n"))
            first = chunk_lines - lines % chunk_lines - 1  # index of the next chunk's end
            ends.extend((newlines[first::chunk_lines] + offset + 1).tolist())
            lines += newlines.size
            offset += len(block)
            last = block[-1:]
    if last != b"\n":
        lines += 1  # a last line without a newline is still a line
    if offset and (not ends or ends[-1] != offset):
        ends.append(offset)
    return ends, lines


def plan_chunks(inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk | ChunkRef]:
    """The chunks of `inp`: byte ranges for plain files (`_is_ranged`) whose lines split
    on the byte `\n`, else the lines themselves.

    Both sides of a pair are scanned before any chunk is emitted, so different line
    counts are reported before any data moves.
    """
    if not all(_is_ranged(u) for u in inp.urls()):
        yield from read_chunks(inp, chunk_lines)
        return
    try:
        wanted = zip(inp.urls(), inp.encodings, strict=False)  # TSV: one file
        found = tuple(_found_encoding(url, encoding) for url, encoding in wanted)
        if any(encodings.transcodes(e) for e in found):
            yield from read_chunks(inp, chunk_lines)
            return
        src_ends, n_src = _chunk_ends(inp.src, chunk_lines)
        tgt_ends, n_tgt = (None, n_src) if inp.tgt is None else _chunk_ends(inp.tgt, chunk_lines)
    except FileNotFoundError as e:
        raise InputError(f"no such file: {e.filename}") from e
    if n_src != n_tgt:
        hint = encodings.alignment_hint(found)
        raise CorpusAlignmentError(f"{inp.src} has {n_src} lines but {inp.tgt} has {n_tgt}{hint}")
    src_start = tgt_start = 0
    for k, src_end in enumerate(src_ends):
        tgt = None
        if tgt_ends is not None and inp.tgt is not None:
            tgt = (inp.tgt, tgt_start, tgt_ends[k])
            tgt_start = tgt_ends[k]
        yield ChunkRef(
            inp.origin,
            inp.role,
            1 + k * chunk_lines,
            (inp.src, src_start, src_end),
            tgt,
            inp.columns,
            (found[0], found[1] if len(found) > 1 else UTF8),
        )
        src_start = src_end


def _read_blob(url: str, start: int, end: int, first: bool) -> bytes | None:
    """Bytes `start` to `end` of `url` as one blob of lines, without its last newline;
    None where a line is longer than MAX_RECORD_BYTES (it must be read past instead)."""
    with fsspec.open(url, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    if _has_overlong(data):
        return None
    data = data[:-1] if data.endswith(b"\n") else data
    return data[len(UTF8_BOM) :] if first and data.startswith(UTF8_BOM) else data


def _range_lines(url: str, start: int, end: int, first: bool) -> Iterator[bytes]:
    """The lines of bytes `start` to `end` of `url`, streamed (`split_lines`)."""
    with fsspec.open(url, "rb") as f:
        f.seek(start)
        lines = split_lines(_blocks_until(f, url, end - start))
        head = next(lines, None)
        if head is None:
            return
        bom = first and type(head) is bytes and head.startswith(UTF8_BOM)
        yield head[len(UTF8_BOM) :] if bom else head
        yield from lines


def _has_overlong(data: bytes) -> bool:
    """Whether a line of `data` is longer than MAX_RECORD_BYTES (a vectorised test)."""
    if len(data) <= MAX_RECORD_BYTES:
        return False
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    bounds = np.concatenate(([-1], ends, [len(data)]))
    return bool((np.diff(bounds) - 1).max() > MAX_RECORD_BYTES)


def _blocks_until(f: BinaryIO, url: str, size: int) -> Iterator[bytes]:
    """The next `size` bytes of `f`, in blocks."""
    while size > 0 and (block := read_block(f, url, min(size, BLOCK_SIZE))):
        size -= len(block)
        yield block


def load_chunks(ref: ChunkRef, chunk_bytes: int = CHUNK_BYTES) -> Iterator[RawChunk]:
    """The lines a ChunkRef points at: one chunk read at once where each range is within
    `chunk_bytes` and no line is too long, else streamed in chunks of about `chunk_bytes`
    a side at most."""
    first = ref.first_line == 1
    ranges = [r for r in (ref.src, ref.tgt) if r is not None]
    if all(end - start <= chunk_bytes for _, start, end in ranges):
        blobs = [_read_blob(*r, first) for r in ranges]
        if all(blob is not None for blob in blobs):
            tgt = blobs[1] if ref.tgt is not None else None
            yield RawChunk(
                ref.origin, ref.role, ref.first_line, blobs[0], tgt, ref.columns, ref.encodings
            )
            return
    sides = [_range_lines(*r, first) for r in ranges]
    line = ref.first_line
    while True:
        src, *tgt = take_lines(sides, sys.maxsize, chunk_bytes)
        if not src:
            return
        yield lines_chunk(ref, line, src, tgt[0] if tgt else None, ref.encodings)
        line += len(src)


class LinesReader(Reader):
    """A pair of line-aligned text files."""

    NAME = "lines"
    PAIRED = True

    SPLIT: ClassVar[str] = (
        "plain files: byte ranges of whole lines, one per piece; compressed, archived "
        "or HTTP: streamed by one worker"
    )

    def plan(self, inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk | ChunkRef]:
        return plan_chunks(inp, chunk_lines)

    def load(self, piece: Any) -> Iterator[RawChunk]:
        if isinstance(piece, ChunkRef):
            return load_chunks(piece)
        return iter((piece,))
