"""Line-aligned text files, a pair (`train.en`, `train.zh`) or one TSV file: plain files
on any filesystem that reads byte ranges are read by many workers, other streams by one.

A plain file on disk or in an object store (`RANGED`) is planned in two steps, so that no
worker reads a whole file and no text passes through a shuffle: its spans of SPAN_BYTES
are measured by as many workers (`measure`: their line ends counted at memory speed,
where every MARK_EVERY-th line starts, the side's encoding from its first bytes); then the
spans' counts are summed into line numbers (a pair whose sides differ in lines is refused
there, before any text moves), and the input is cut into pieces of `chunk_lines` lines
(`ChunkRef`: for each side, a line start known from a mark and the lines to skip past
it), which the workers that clean them read (`load_chunks`). A line-aligned pair's
pieces hold the same lines of both files, whatever their lengths.

Compressed files, archive members and files on filesystems that cannot read a byte
range (HTTP) cannot be split: one worker streams them (`raw_corpus.read_chunks`),
holding a chunk at a time, and sends the chunks on.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO, ClassVar, NamedTuple

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import infer_compression

from nmtpipe.transforms.corpus.base import SurveyedReader
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import (
    BLOCK_SIZE,
    CHUNK_BYTES,
    MAX_RECORD_BYTES,
    UTF8_BOM,
    RawChunk,
    found_encoding,
    lines_chunk,
    read_block,
    read_blocks,
    read_chunks,
    read_head,
    split_lines,
    take_lines,
)
from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings, fsio
from nmtpipe.transforms.storage.encodings import UTF8

# fsspec's protocols whose files are read by byte range, as plain local files are.
RANGED = {"s3", "s3a", "gs", "gcs", "memory", "abfs", "az"}
# A plain side is surveyed in spans of this many bytes, each measured by some worker.
SPAN_BYTES = 1 << 25
# What a measure reads at once: a request to an object store, where many small ones
# cost more than their bytes.
REQUEST_BYTES = 1 << 24
# A span's measure records where every MARK_EVERY-th line starts, so that a piece's
# reader finds its first line past fewer others.
MARK_EVERY = 1 << 10


class Span(NamedTuple):
    """Bytes `start` to `end` of side `side` (0: the source or a TSV file, 1: the target)."""

    side: int
    start: int
    end: int


class Measured(NamedTuple):
    """What a worker found in a Span: its line ends, the offsets just past its first and
    every `every`-th after it (so that a line is found past fewer than `every` others,
    wherever the spans cut), whether its last byte ends a line, and the side's encoding
    (found in the side's first span only)."""

    newlines: int
    marks: tuple[int, ...]
    every: int
    ends_line: bool
    encoding: str | None


class ChunkRef(NamedTuple):
    """Lines `first_line` to `first_line + count - 1` of plain files: each side's are
    read from `(url, start, skip, expected)`, past `skip` lines from byte `start` (a
    line's start), `expected` bytes read at once (the lines' share of the file, and a
    margin: one request to an object store where the estimate holds); see
    `load_chunks`."""

    origin: str
    role: str
    first_line: int
    count: int
    src: tuple[str, int, int, int]
    tgt: tuple[str, int, int, int] | None
    columns: tuple[int, int]
    encodings: tuple[str, str] = (UTF8, UTF8)


def unranged(url: str) -> str | None:
    """Why `url` cannot be read in byte ranges by many workers (None where it can: a
    plain file on local disk, an object store or in memory)."""
    if "::" in url:
        return "an archive member"
    compression = infer_compression(url)
    if compression is not None:
        return f"one {compression} stream"
    fs, _ = fsspec.core.url_to_fs(url)
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if isinstance(fs, LocalFileSystem) or protocols & RANGED:
        return None
    return f"{'/'.join(sorted(protocols))} is read as a stream"


@contextlib.contextmanager
def opened(url: str) -> Iterator[BinaryIO]:
    """A plain file opened to be read in ranges, a block at a time, no more: an object
    store's file would otherwise fetch its block size (s3fs: 50 MB) past each read, many
    times a piece's bytes. InputError where it is gone."""
    try:
        fs, path = fsio.url_to_fs(url)
        with fs.open(path, "rb", cache_type="none") as f:
            yield f
    except FileNotFoundError as e:
        raise InputError(f"no such file: {url}") from e


def survey(inp: CorpusInput, span_bytes: int = SPAN_BYTES) -> list[Span]:
    """The spans of plain files (`unranged`) whose line ends workers count; none for
    a stream that cannot be read in parts, which is read where it is planned."""
    if any(map(unranged, inp.urls())):
        return []
    spans = []
    for side, url in enumerate(inp.urls()):
        try:
            size = fsio.size(url)
        except FileNotFoundError as e:
            raise InputError(f"no such file: {url}") from e
        starts = range(0, size, span_bytes) if size else [0]
        spans += [Span(side, s, min(s + span_bytes, size)) for s in starts]
    return spans


def measure(inp: CorpusInput, span: Span, every: int = MARK_EVERY) -> Measured:
    """A span's line ends, counted at memory speed with numpy, and every `every`-th's
    offset; the side's encoding from its first bytes where the span is its first."""
    url = inp.urls()[span.side]
    encoding, size = None, span.end - span.start
    with opened(url) as f:
        f.seek(span.start)
        if span.start == 0:  # the side's first bytes tell its encoding, then are counted
            head = read_head(f, url)
            whole = len(head) < encodings.SAMPLE_BYTES
            encoding = found_encoding(url, inp.encodings[span.side], head, whole)
            rest = blocks_until(f, url, size - len(head), REQUEST_BYTES)
            blocks = itertools.chain([head[:size]] if head else [], rest)
        else:
            blocks = blocks_until(f, url, size, REQUEST_BYTES)
        count, offset, marks, last = 0, span.start, [], b"\n"
        for block in blocks:
            newlines = _line_ends(block)
            first = -count % every  # the block's first line end whose span index is a mark's
            marks += (newlines[first::every] + offset + 1).tolist()
            count += newlines.size
            offset += len(block)
            last = block[-1:]
    return Measured(count, tuple(marks), every, last == b"\n", encoding)


class MarkIndex:
    """Where records start, as far as the marks of a file's spans tell: where a reader
    starts, and how many records it passes, to reach record `n` (from 0)."""

    def __init__(self, spans: Iterable[tuple[int, Sequence[int], int]], after: int) -> None:
        """`spans`: each span's records counted, marks and their spacing, in order; a
        span's `j`-th mark is where its record `j * every + after` starts."""
        self.records, self.offsets = [0], [0]
        self.counted = 0
        for count, marks, every in spans:
            self.records += (self.counted + j * every + after for j in range(len(marks)))
            self.offsets += marks
            self.counted += count

    def locate(self, n: int) -> tuple[int, int]:
        """(offset of a record's start, records from it to record `n`)."""
        k = bisect.bisect_right(self.records, n) - 1
        return self.offsets[k], n - self.records[k]


def plan_chunks(
    inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Span, Measured]]
) -> Iterator[RawChunk | ChunkRef]:
    """The chunks of `inp`: references to `chunk_lines` lines of plain files whose spans
    were measured and whose lines split on the byte `\\n`, else the lines themselves,
    read here. Different line counts are reported before any data moves."""
    by_side: list[list[tuple[Span, Measured]]] = [[] for _ in inp.urls()]
    for span, found in sorted(measured):
        by_side[span.side].append((span, found))
    if not measured or any(encodings.transcodes(s[0][1].encoding or UTF8) for s in by_side):
        yield from read_chunks(inp, chunk_lines)
        return
    found = tuple(side[0][1].encoding or UTF8 for side in by_side)
    # A line starts after each line end; a last line without one is still a line.
    index = [MarkIndex(((m.newlines, m.marks, m.every) for _, m in side), 1) for side in by_side]
    counts = [
        i.counted + (not side[-1][1].ends_line) for i, side in zip(index, by_side, strict=True)
    ]
    if len(counts) == 2 and counts[0] != counts[1]:
        hint = encodings.alignment_hint(found)
        raise CorpusAlignmentError(
            f"{inp.src} has {counts[0]} lines but {inp.tgt} has {counts[1]}{hint}"
        )
    per_line = [side[-1][0].end / max(n, 1) for side, n in zip(by_side, counts, strict=True)]
    for start in range(0, counts[0], chunk_lines):
        count = min(chunk_lines, counts[0] - start)
        located = zip(inp.urls(), index, per_line, strict=True)
        src, *tgt = (
            (url, *_expected(*side.locate(start), count, size)) for url, side, size in located
        )
        yield ChunkRef(
            inp.origin,
            inp.role,
            1 + start,
            count,
            src,
            tgt[0] if tgt else None,
            inp.columns,
            (found[0], found[1] if len(found) > 1 else UTF8),
        )


def _expected(start: int, skip: int, count: int, per_line: float) -> tuple[int, int, int]:
    """(start, skip, bytes to read at once) of lines of about `per_line` bytes each."""
    return start, skip, int((skip + count) * per_line * 1.5) + (1 << 16)


def _read_lines(
    side: tuple[str, int, int, int], count: int, first: bool, budget: int
) -> bytes | None:
    """`count` lines from the `skip`-th line after byte `start` of `url` as one blob,
    without its last newline; None where they, with the lines skipped, pass `budget`
    bytes or a line is longer than MAX_RECORD_BYTES (they must be streamed instead).
    Each byte is looked at once, for the line ends that cut the blob and measure its
    lines."""
    url, start, skip, expected = side
    held, newlines, data, ends = 0, 0, [], []
    with opened(url) as f:
        f.seek(start)
        sizes = itertools.chain([min(expected, budget + 1)], itertools.repeat(BLOCK_SIZE))
        while block := read_block(f, url, next(sizes)):
            data.append(block)
            ends.append(_line_ends(block) + held)
            held += len(block)
            newlines += ends[-1].size
            if newlines >= skip + count:
                break
            if held > budget:
                return None
    whole, at = b"".join(data), np.concatenate(ends)
    begin = int(at[skip - 1]) + 1 if skip else 0
    end = int(at[skip + count - 1]) if len(at) >= skip + count else len(whole)
    bounds = np.concatenate(([begin - 1], at[skip : skip + count - 1], [end]))
    if end - begin > budget or int((np.diff(bounds) - 1).max()) > MAX_RECORD_BYTES:
        return None
    blob = whole[begin:end]
    return blob[len(UTF8_BOM) :] if first and blob.startswith(UTF8_BOM) else blob


def _line_ends(block: bytes) -> np.ndarray:
    """The offsets of `block`'s line ends, at memory speed."""
    return np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n"))


def _stream_lines(side: tuple[str, int, int, int], count: int, first: bool) -> Iterator[bytes]:
    """The same lines as `_read_lines`, streamed (`split_lines`)."""
    url, start, skip, _ = side
    with opened(url) as f:
        f.seek(start)
        lines = itertools.islice(split_lines(read_blocks(f, url)), skip, skip + count)
        head = next(lines, None)
        if head is None:
            return
        bom = first and type(head) is bytes and head.startswith(UTF8_BOM)
        yield head[len(UTF8_BOM) :] if bom else head
        yield from lines


def blocks_until(f: BinaryIO, url: str, size: int, block_size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """The next `size` bytes of `f`, in blocks."""
    while size > 0 and (block := read_block(f, url, min(size, block_size))):
        size -= len(block)
        yield block


def load_chunks(ref: ChunkRef, chunk_bytes: int = CHUNK_BYTES) -> Iterator[RawChunk]:
    """The lines a ChunkRef points at: one chunk read at once where each side's are
    within `chunk_bytes` and none is too long, else streamed in chunks of about
    `chunk_bytes` a side at most."""
    first = ref.first_line == 1
    sides = [s for s in (ref.src, ref.tgt) if s is not None]
    blobs = [_read_lines(s, ref.count, first, chunk_bytes) for s in sides]
    if all(blob is not None for blob in blobs):
        tgt = blobs[1] if ref.tgt is not None else None
        yield RawChunk(
            ref.origin, ref.role, ref.first_line, blobs[0], tgt, ref.columns, ref.encodings
        )
        return
    streams = [_stream_lines(s, ref.count, first) for s in sides]
    line = ref.first_line
    while True:
        src, *tgt = take_lines(streams, sys.maxsize, chunk_bytes)
        if not src:
            return
        yield lines_chunk(ref, line, src, tgt[0] if tgt else None, ref.encodings)
        line += len(src)


class LinesReader(SurveyedReader):
    """A pair of line-aligned text files."""

    NAME = "lines"
    PAIRED = True
    SPLIT: ClassVar[str] = (
        "plain files: spans whose line ends workers count, then pieces of lines read by "
        "the workers that clean them; compressed, archived or HTTP: streamed by one worker"
    )

    def whole(self, inp: CorpusInput) -> str | None:
        return next(filter(None, map(unranged, inp.urls())), None)

    def survey(self, inp: CorpusInput) -> list[Span]:
        return survey(inp)

    def measure(self, inp: CorpusInput, part: Any) -> Measured:
        return measure(inp, part)

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[RawChunk | ChunkRef]:
        return plan_chunks(inp, chunk_lines, measured)

    def load(self, piece: Any) -> Iterator[RawChunk]:
        if isinstance(piece, ChunkRef):
            return load_chunks(piece)
        return iter((piece,))
