"""Raw lines of corpus files, in chunks, the two sides of a pair kept in step.

Lines are bytes split on `\\n` only: decoding and clean-up happen later, per line, so
that one bad line is a reject rather than a crash, and so that characters Python's
`str.splitlines` would break on (U+2028, form feed, ...) cannot shift one side against
the other. A chunk carries many lines as one `\\n`-joined blob: per-element cost in a
Beam pipeline is paid per chunk, not per line.

Compressed files, archive members and remote files are streamed by one reader, both
sides in lockstep (`read_chunks`). Plain local files are only scanned for line ends
(`plan_chunks`, at memory speed with numpy): the chunks travel as byte ranges
(`ChunkRef`) and each worker reads its own, so no corpus text passes through a shuffle.
"""

from __future__ import annotations

import contextlib
import itertools
import lzma
import tarfile
import zlib
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import infer_compression

from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage.inputs import CorpusInput, split_archive_url

BLOCK_SIZE = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"


class RawChunk(NamedTuple):
    """Consecutive raw lines of one input: lines `first_line`, `first_line + 1`, ...

    `src` and `tgt` are the lines joined with `\\n`; for TSV input `tgt` is None and `src`
    holds whole TSV lines.
    """

    origin: str
    role: str
    first_line: int
    src: bytes
    tgt: bytes | None
    columns: tuple[int, int]


_READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, tarfile.TarError)


@contextlib.contextmanager
def open_binary(url: str) -> Iterator[BinaryIO]:
    """Open `url` for streaming reads, decompressing by suffix.

    `tar://MEMBER::ARCHIVE` reads one member of a (compressed) tar archive in a single
    forward pass; each call opens its own stream, so the two sides of a pair stored in
    one archive never seek back and forth in a gzip stream.
    """
    archived = split_archive_url(url)
    with contextlib.ExitStack() as stack:
        try:
            if archived is None:
                stream = stack.enter_context(fsspec.open(url, "rb", compression="infer"))
            else:
                member, archive = archived
                raw = stack.enter_context(fsspec.open(archive, "rb"))
                tar = stack.enter_context(tarfile.open(fileobj=raw, mode="r|*"))
                stream = next(
                    (
                        tar.extractfile(info)
                        for info in tar
                        if info.isfile() and info.name.removeprefix("./") == member
                    ),
                    None,
                )
                if stream is None:
                    raise InputError(f"{archive} has no member {member}")
        except FileNotFoundError as e:
            raise InputError(f"no such file: {url}") from e
        except _READ_ERRORS as e:
            raise InputError(f"cannot read {url}: {e}") from e
        yield stream


def iter_lines(f: BinaryIO, url: str) -> Iterator[bytes]:
    """The lines of `f` without their `\\n`; a missing final newline changes nothing."""
    pending = b""
    while True:
        try:
            block = f.read(BLOCK_SIZE)
        except _READ_ERRORS as e:
            raise InputError(f"cannot read {url}: {e}") from e
        if not block:
            break
        lines = (pending + block).split(b"\n")
        pending = lines.pop()
        yield from lines
    if pending:
        yield pending


def _strip_bom(lines: list[bytes]) -> None:
    if lines and lines[0].startswith(UTF8_BOM):
        lines[0] = lines[0][len(UTF8_BOM) :]


def read_chunks(inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk]:
    """All lines of `inp`, `chunk_lines` at a time.

    For a file pair both sides advance together; when one ends first, the rest of the
    other is counted and `CorpusAlignmentError` names both files and both counts.
    """
    with contextlib.ExitStack() as stack:
        src_lines = iter_lines(stack.enter_context(open_binary(inp.src)), inp.src)
        tgt_lines = (
            None
            if inp.tgt is None
            else iter_lines(stack.enter_context(open_binary(inp.tgt)), inp.tgt)
        )
        line = 1
        while True:
            src = list(itertools.islice(src_lines, chunk_lines))
            tgt = None if tgt_lines is None else list(itertools.islice(tgt_lines, chunk_lines))
            if line == 1:
                _strip_bom(src)
                if tgt is not None:
                    _strip_bom(tgt)
            if tgt is not None and len(src) != len(tgt):
                assert tgt_lines is not None and inp.tgt is not None
                n_src = line - 1 + len(src) + sum(1 for _ in src_lines)
                n_tgt = line - 1 + len(tgt) + sum(1 for _ in tgt_lines)
                raise CorpusAlignmentError(f"{inp.src} has {n_src} lines but {inp.tgt} has {n_tgt}")
            if not src:
                return
            yield RawChunk(
                origin=inp.origin,
                role=inp.role,
                first_line=line,
                src=b"\n".join(src),
                tgt=None if tgt is None else b"\n".join(tgt),
                columns=inp.columns,
            )
            line += len(src)


class ChunkRef(NamedTuple):
    """A chunk of plain local files as byte ranges `(url, start, end)`; see `load_chunk`."""

    origin: str
    role: str
    first_line: int
    src: tuple[str, int, int]
    tgt: tuple[str, int, int] | None
    columns: tuple[int, int]


def _is_plain_local(url: str) -> bool:
    if split_archive_url(url) is not None or infer_compression(url) is not None:
        return False
    fs, _ = fsspec.core.url_to_fs(url)
    return isinstance(fs, LocalFileSystem)


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
    """The chunks of `inp`: byte ranges for plain local files, else the lines themselves.

    Both sides of a pair are scanned before any chunk is emitted, so different line
    counts are reported before any data moves.
    """
    if not all(_is_plain_local(u) for u in inp.urls()):
        yield from read_chunks(inp, chunk_lines)
        return
    try:
        src_ends, n_src = _chunk_ends(inp.src, chunk_lines)
        tgt_ends, n_tgt = (None, n_src) if inp.tgt is None else _chunk_ends(inp.tgt, chunk_lines)
    except FileNotFoundError as e:
        raise InputError(f"no such file: {e.filename}") from e
    if n_src != n_tgt:
        raise CorpusAlignmentError(f"{inp.src} has {n_src} lines but {inp.tgt} has {n_tgt}")
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
        )
        src_start = src_end


def _read_range(url: str, start: int, end: int, first: bool) -> bytes:
    with fsspec.open(url, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    if data.endswith(b"\n"):
        data = data[:-1]
    return data[len(UTF8_BOM) :] if first and data.startswith(UTF8_BOM) else data


def load_chunk(ref: ChunkRef) -> RawChunk:
    """The lines a ChunkRef points at."""
    first = ref.first_line == 1
    return RawChunk(
        origin=ref.origin,
        role=ref.role,
        first_line=ref.first_line,
        src=_read_range(*ref.src, first),
        tgt=None if ref.tgt is None else _read_range(*ref.tgt, first),
        columns=ref.columns,
    )
