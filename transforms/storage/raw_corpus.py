"""Raw lines of corpus files, in chunks, the two sides of a pair kept in step.

Lines are bytes split on `\\n` only: decoding and clean-up happen later, per line, so
that one bad line is a reject rather than a crash, and so that characters Python's
`str.splitlines` would break on (U+2028, form feed, ...) cannot shift one side against
the other. A chunk carries many lines as one `\\n`-joined blob: per-element cost in a
Beam pipeline is paid per chunk, not per line.

Compressed files, archive members and files on filesystems that cannot read a byte
range (HTTP) are streamed by one reader, both sides in lockstep (`read_chunks`). Plain
files on disk or in an object store (`RANGED`) are only scanned for line ends
(`plan_chunks`, at memory speed with numpy): the chunks travel as byte ranges
(`ChunkRef`) and each worker reads its own, so no corpus text passes through a shuffle
(the planner still reads each file once, for its line ends).

Each side's encoding is found as it is opened (`encodings.py`) and travels with its
chunks; a side in UTF-16 or UTF-32 is transcoded to UTF-8 as it is read, since its lines
cannot be split on the byte `\\n`.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import lzma
import posixpath
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, NamedTuple

import fsspec
import numpy as np
from fsspec.compression import compr
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import infer_compression

from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.encodings import AUTO, UTF8
from nmtpipe.transforms.storage.inputs import (
    CorpusInput,
    compression_of,
    missing,
    nearest,
    split_archive_url,
)

BLOCK_SIZE = 1 << 20
UTF8_BOM = codecs.BOM_UTF8
# A line longer than this is never held whole: it is read past and rejected `too-long`
# with its first SHOWN_BYTES (64 times what `--max-chars`' default allows, which the
# options hold to a quarter of it: no line a filter could keep is ever cut).
MAX_RECORD_BYTES = 1 << 16
SHOWN_BYTES = 1 << 10
# A chunk's side holds about this many bytes at most (and `chunk_lines` lines): lines
# under MAX_RECORD_BYTES but many (20,000 of 60 kB are 1.2 GB) make more chunks, not a
# larger one. Lines are taken STEP at a time, so a side may pass it by STEP lines.
CHUNK_BYTES = 1 << 24
STEP = 256
TOO_LONG = "too-long"
# fsspec's protocols whose files are read by byte range, as plain local files are.
RANGED = {"s3", "s3a", "gs", "gcs", "memory", "abfs", "az"}


class Overlong(bytes):
    """The first SHOWN_BYTES of a line of `size` bytes, more than MAX_RECORD_BYTES: what
    is kept of it (bytes, so that a reader that parses lines sees a line cut short)."""

    size: int

    def __new__(cls, line_start: bytes, size: int) -> Overlong:
        cut = super().__new__(cls, line_start[:SHOWN_BYTES])
        cut.size = size
        return cut


class Unread(NamedTuple):
    """A record of a chunk that its reader could take no pair from (a JSON line that is
    no object, a translation unit without one of the languages): `index` in the chunk,
    the reject's reason and detail, and what there was of each side."""

    index: int
    reason: str
    detail: str
    src: bytes | None
    tgt: bytes | None


class RawChunk(NamedTuple):
    """Consecutive raw records of one input: records `first_line`, `first_line + 1`, ...
    (lines of a text file, segments of an SGML file, rows of a table, units of a TMX).

    `src` and `tgt` are the records joined with `\\n`, each side in its `encodings`
    entry (as found: `encodings.decoding_codec` says what decodes it), or in UTF-8
    where `decoded` (a reader that decodes its input itself, TMX: `encodings` is then
    what the input was read in, recorded, not what decodes the chunk); for TSV input
    `tgt` is None and `src` holds whole TSV lines. `unread`: records the reader could
    take no pair from (empty in `src` and `tgt`).
    """

    origin: str
    role: str
    first_line: int
    src: bytes
    tgt: bytes | None
    columns: tuple[int, int]
    encodings: tuple[str, str] = (UTF8, UTF8)
    unread: tuple[Unread, ...] = ()
    decoded: bool = False


_READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, tarfile.TarError, zipfile.BadZipFile)


@contextlib.contextmanager
def open_binary(url: str) -> Iterator[BinaryIO]:
    """Open `url` for streaming reads, decompressing by suffix (an archive member's by
    its own name).

    `tar://MEMBER::ARCHIVE` reads one member of a (compressed) tar archive in a single
    forward pass; each call opens its own stream, so the two sides of a pair stored in
    one archive never seek back and forth in a gzip stream. Other chained URLs
    (`zip://MEMBER::ARCHIVE`) are fsspec's.
    """
    archived = split_archive_url(url)
    compression = compression_of(url)
    with contextlib.ExitStack() as stack:
        try:
            if archived is None:
                stream = stack.enter_context(fsspec.open(url, "rb", compression=compression))
            else:
                member, archive = archived
                raw = stack.enter_context(fsspec.open(archive, "rb"))
                tar = stack.enter_context(tarfile.open(fileobj=raw, mode="r|*"))
                stream, names = None, []
                for info in tar:
                    name = info.name.removeprefix("./")
                    if name == member and not info.isfile():
                        raise InputError(f"{archive}: {member} is {_not_a_file(info)}")
                    if name == member:
                        stream = tar.extractfile(info)
                        break
                    names.append(name)
                if stream is None:
                    raise InputError(f"{archive} has no member {member}{nearest(member, names)}")
                if compression is not None:
                    stream = stack.enter_context(compr[compression](stream, mode="rb"))
        except FileNotFoundError as e:
            raise InputError(missing(url)) from e
        except _READ_ERRORS as e:
            raise InputError(f"cannot read {url}: {e}") from e
        yield stream


def _not_a_file(info: tarfile.TarInfo) -> str:
    """What a tar member that is no regular file is, in a user's words."""
    if info.islnk():
        return f"a link to {info.linkname}, not a file: name {info.linkname}"
    if info.issym():
        target = posixpath.normpath(posixpath.join(posixpath.dirname(info.name), info.linkname))
        return f"a link to {target}, not a file: name {target}"
    return "a folder, not a file" if info.isdir() else "not a regular file"


def _read(f: BinaryIO, url: str, size: int) -> bytes:
    try:
        return f.read(size)
    except _READ_ERRORS as e:
        raise InputError(f"cannot read {url}: {e}") from e


def read_blocks(f: BinaryIO, url: str, size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """The bytes of `f` in blocks; a failing read is an InputError naming `url`."""
    while block := _read(f, url, size):
        yield block


def read_head(f: BinaryIO, url: str, size: int = encodings.SAMPLE_BYTES) -> bytes:
    """The first `size` bytes of `f` (fewer only at its end)."""
    head = b""
    while len(head) < size and (block := _read(f, url, size - len(head))):
        head += block
    return head


def split_lines(blocks: Iterable[bytes], limit: int = MAX_RECORD_BYTES) -> Iterator[bytes]:
    """The lines of a text given in blocks, without their `\n`; a missing final newline
    changes nothing. A line longer than `limit` comes as an `Overlong`, in linear time
    and without holding more than `limit` bytes of it, however long it is (a stream
    without a newline: one such line)."""
    pending, skipped = b"", 0  # skipped: bytes of the pending line past the limit
    for block in blocks:
        if skipped:
            end = block.find(b"\n")
            if end < 0:
                skipped += len(block)
                continue
            yield Overlong(pending, len(pending) + skipped + end)
            pending, skipped, block = b"", 0, block[end + 1 :]
        lines = (pending + block).split(b"\n")
        pending = lines.pop()
        if lines and max(map(len, lines)) > limit:
            lines = [line if len(line) <= limit else Overlong(line, len(line)) for line in lines]
        yield from lines
        if len(pending) > limit:
            pending, skipped = pending[:limit], len(pending) - limit
    if skipped:
        yield Overlong(pending, len(pending) + skipped)
    elif pending:
        yield pending


def too_long(index: int, src: bytes | None, tgt: bytes | None) -> Unread | None:
    """Record `index` of a chunk as a `too-long` reject where a side is `Overlong`."""
    over = [(name, side) for name, side in (("src", src), ("tgt", tgt)) if type(side) is Overlong]
    if not over:
        return None
    name, side = over[0]
    assert isinstance(side, Overlong)
    detail = f"{name} has a line of {side.size:,} bytes (limit {MAX_RECORD_BYTES:,}): not read"
    plain = [None if side is None else bytes(side) for side in (src, tgt)]  # coders want bytes
    return Unread(index, TOO_LONG, detail, *plain)


class Side(NamedTuple):
    """One side of a pair, opened: its records (bytes in `encoding`, or in UTF-8 where
    `encoding` is transcoded), and what a record is called in messages."""

    records: Iterator[bytes]
    encoding: str
    unit: str = "lines"


def found_encoding(url: str, wanted: str, sample: bytes, whole: bool) -> str:
    """The encoding of the side at `url`: `wanted`, unless it is `auto`."""
    return encodings.sniff(sample, whole) if wanted == AUTO else wanted


def text_blocks(f: BinaryIO, url: str, wanted: str) -> tuple[Iterator[bytes], str]:
    """The bytes of a text file in blocks, in UTF-8 where its encoding is transcoded, and
    its encoding (`wanted`, or found from its first bytes); a UTF-8 mark is dropped."""
    head = read_head(f, url)
    blocks = read_blocks(f, url)
    encoding = found_encoding(url, wanted, head, len(head) < encodings.SAMPLE_BYTES)
    if head.startswith(UTF8_BOM) and encodings.decoding_codec(encoding) == UTF8:
        head = head[len(UTF8_BOM) :]
    data: Iterator[bytes] = itertools.chain([head], blocks)
    if encodings.transcodes(encoding):
        data = encodings.transcoded(data, encoding)
    return data, encoding


@contextlib.contextmanager
def open_lines(url: str, wanted: str = AUTO) -> Iterator[Side]:
    """The lines of the text file at `url` (see `text_blocks`)."""
    with open_binary(url) as f:
        blocks, encoding = text_blocks(f, url, wanted)
        yield Side(split_lines(blocks), encoding)


def read_chunks(
    inp: CorpusInput,
    chunk_lines: int,
    opener: Callable[[str, str], contextlib.AbstractContextManager[Side]] = open_lines,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[RawChunk]:
    """All records of `inp`, `chunk_lines` at a time (fewer where a side's reach
    `chunk_bytes`), each side opened by `opener` (url, wanted encoding).

    For a file pair both sides advance together; when one ends first, the rest of the
    other is counted and `CorpusAlignmentError` names both files and both counts.
    """
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(opener(inp.src, inp.encodings[0]))
        tgt = None if inp.tgt is None else stack.enter_context(opener(inp.tgt, inp.encodings[1]))
        found = (src.encoding, UTF8 if tgt is None else tgt.encoding)
        line = 1
        sides = [src.records] if tgt is None else [src.records, tgt.records]
        while True:
            src_lines, *rest = _take(sides, chunk_lines, chunk_bytes)
            tgt_lines = rest[0] if rest else None
            if tgt_lines is not None and len(src_lines) != len(tgt_lines):
                assert tgt is not None and inp.tgt is not None
                n_src = line - 1 + len(src_lines) + sum(1 for _ in src.records)
                n_tgt = line - 1 + len(tgt_lines) + sum(1 for _ in tgt.records)
                hint = encodings.alignment_hint(found)
                raise CorpusAlignmentError(
                    f"{inp.src} has {n_src} {src.unit} but {inp.tgt} has {n_tgt}{hint}"
                )
            if not src_lines:
                return
            yield lines_chunk(inp, line, src_lines, tgt_lines, found)
            line += len(src_lines)


def _take(sides: list[Iterator[bytes]], most: int, budget: int) -> list[list[bytes]]:
    """The next lines of every side together: `most`, or fewer where a side's bytes reach
    `budget` or a side ends (then the sides may differ in length: the caller's to tell)."""
    taken: list[list[bytes]] = [[] for _ in sides]
    held = [0] * len(sides)
    ended = False
    while not ended and len(taken[0]) < most and max(held) < budget:
        want = min(STEP, most - len(taken[0]))
        for k, side in enumerate(sides):
            got = list(itertools.islice(side, want))
            taken[k] += got
            held[k] += sum(map(len, got))
            ended |= len(got) < want
    return taken


def lines_chunk(
    inp: CorpusInput | ChunkRef,
    first_line: int,
    src: list[bytes],
    tgt: list[bytes] | None,
    found: tuple[str, str],
) -> RawChunk:
    """Consecutive lines of `inp` as a chunk; a pair with an `Overlong` side is unread
    (`too_long`), its lines left empty."""
    unread = []
    for i in _overlong_rows(src, tgt):
        unread.append(too_long(i, src[i], None if tgt is None else tgt[i]))
        src[i] = b""
        if tgt is not None:
            tgt[i] = b""
    return RawChunk(
        origin=inp.origin,
        role=inp.role,
        first_line=first_line,
        src=b"\n".join(src),
        tgt=None if tgt is None else b"\n".join(tgt),
        columns=inp.columns,
        encodings=found,
        unread=tuple(u for u in unread if u is not None),
    )


def _overlong_rows(*sides: list[bytes] | None) -> list[int]:
    rows = {i for side in sides if side for i, line in enumerate(side) if type(line) is Overlong}
    return sorted(rows)


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
    while size > 0 and (block := _read(f, url, min(size, BLOCK_SIZE))):
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
        src, *tgt = _take(sides, sys.maxsize, chunk_bytes)
        if not src:
            return
        yield lines_chunk(ref, line, src, tgt[0] if tgt else None, ref.encodings)
        line += len(src)
