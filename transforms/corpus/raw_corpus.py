"""Raw records of corpus files, in chunks, the two sides of a pair kept in step: the
chunk every reader yields and the cleaner takes, and the streams every reader of text
opens (compressed files, archive members, any filesystem).

Lines are bytes split on `\\n` only: decoding and clean-up happen later, per line, so
that one bad line is a reject rather than a crash, and so that characters Python's
`str.splitlines` would break on (U+2028, form feed, ...) cannot shift one side against
the other. A chunk carries many lines as one `\\n`-joined blob: per-element cost in a
Beam pipeline is paid per chunk, not per line.

A stream that cannot be read in parts (one gzip stream, an archive member, a file on a
filesystem without byte ranges) is read by one reader, both sides in lockstep
(`read_chunks`); `readers/lines.py` plans the plain files that can be.

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
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, NamedTuple, Protocol

import fsspec
from fsspec.compression import compr

from nmtpipe.transforms.corpus.inputs import (
    CorpusInput,
    compression_of,
    missing,
    nearest,
    split_archive_url,
)
from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.encodings import AUTO, UTF8, UTF8_BOM_NAME, decoding_codec

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
# Why a reader takes no pair from a record (the cleaner's reasons are `text/filters.py`).
TOO_LONG = "too-long"
BAD_RECORD = "bad-record"  # a record its reader could take no pair from
INVALID_UTF8 = "invalid-utf8"
UNDECODABLE = "undecodable"  # not valid in its encoding, one other than UTF-8
BAD_COLUMNS = "bad-columns"  # a TSV line with fewer columns than the pair's


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
    `tgt` is None and `src` holds whole TSV lines until the TSV reader splits them
    (`readers/tsv.py`). `unread`: records the reader could take no pair from (empty in
    `src` and `tgt`).
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


def read_block(f: BinaryIO, url: str, size: int) -> bytes:
    try:
        return f.read(size)
    except _READ_ERRORS as e:
        raise InputError(f"cannot read {url}: {e}") from e


def read_blocks(f: BinaryIO, url: str, size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """The bytes of `f` in blocks; a failing read is an InputError naming `url`."""
    while block := read_block(f, url, size):
        yield block


def read_head(f: BinaryIO, url: str, size: int = encodings.SAMPLE_BYTES) -> bytes:
    """The first `size` bytes of `f` (fewer only at its end)."""
    head = b""
    while len(head) < size and (block := read_block(f, url, size - len(head))):
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


class Located(Protocol):
    """Where a chunk's lines come from: an input, or a piece of one."""

    origin: str
    role: str
    columns: tuple[int, int]


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
            src_lines, *rest = take_lines(sides, chunk_lines, chunk_bytes)
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


def take_lines(sides: list[Iterator[bytes]], most: int, budget: int) -> list[list[bytes]]:
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
    inp: Located,
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


def _without_cr(lines: list[str]) -> list[str]:
    """Lines without the carriage return of a CRLF end (CWMT's files have them)."""
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def decode_lines(
    blob: bytes, side: str, encoding: str = UTF8
) -> tuple[list[str], dict[int, tuple[str, str, bytes]]]:
    """Lines of one side, read in `encoding` (as found: `decoding_codec` says what
    decodes it); undecodable lines are left empty and returned by index with the
    reason, what is wrong and their raw bytes."""
    codec = decoding_codec(encoding)
    try:
        lines = blob.decode(codec).split("\n")
        return (_without_cr(lines) if b"\r" in blob else lines), {}
    except UnicodeDecodeError:
        pass
    reason = INVALID_UTF8 if encoding in (UTF8, UTF8_BOM_NAME) else UNDECODABLE
    named = "" if reason == INVALID_UTF8 else f"not {encoding}: "
    lines, bad = [], {}
    for i, raw in enumerate(blob.split(b"\n")):
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        try:
            lines.append(raw.decode(codec))
        except UnicodeDecodeError as e:
            lines.append("")
            bad[i] = (reason, f"{side}: {named}{e.reason} at byte {e.start}", raw)
    return lines, bad
