"""WMT's SGML test sets (`newsdev2017-enzh-src.en.sgm`), plain or inside archives.

WMT's files before 2021 are SGML in name only (sacreBLEU calls them fake SGML: an `&` is
not always escaped), so they are read as T2T and sacreBLEU read them, by pattern rather
than by an SGML parser: the text between each `<seg …>` and its `</seg>`, in order,
stripped, with its entities (`&amp;`, `&lt;`, `&quot;`, `&#39;`, ...) unescaped, which
T2T and sacreBLEU leave as they are. A segment split over lines is joined with a space.
The work is done on blocks of bytes in the file's own encoding, one regular expression
over each (the markup is ASCII, which no byte of a character of an ASCII-compatible
encoding can be), so that decoding stays the cleaner's, line by line.

The source and reference files of a set have different names but the same documents and
segment ids; a pair whose segment counts or ids differ is refused before it is read.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import re
from collections.abc import Iterable, Iterator

from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.inputs import CorpusInput, file_name, without_compression
from nmtpipe.transforms.storage.raw_corpus import (
    RawChunk,
    Side,
    open_binary,
    open_lines,
    read_chunks,
    text_blocks,
)

SUFFIXES = (".sgm", ".sgml")
# A document's start (its id) or a whole segment (its attributes, its text), in order.
_ITEM = re.compile(
    rb"""<doc\b[^>]*?\bdocid\s*=\s*["']?([^"'\s>]+)[^>]*>|<seg\b([^>]*)>(.*?)</seg\s*>""",
    re.IGNORECASE | re.DOTALL,
)
_SEG_ID = re.compile(rb"""\bid\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_OPEN_SEG = re.compile(rb"<seg\b", re.IGNORECASE)
_LINE_BREAKS = re.compile(rb"\s*\n\s*")
_ENTITY = re.compile(rb"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def is_sgml(url: str) -> bool:
    """Whether `url` names an SGML file (`.sgm`, compressed or not, or an archive's)."""
    return without_compression(file_name(url)).lower().endswith(SUFFIXES)


def unescape(text: bytes, codec: str) -> bytes:
    """`text` with its character references replaced by the characters, written in
    `codec` (one `codec` cannot write, or an unknown name, is kept as it is)."""
    if b"&" not in text:
        return text

    def replace(found: re.Match[bytes]) -> bytes:
        entity = found.group(0).decode("ascii")
        char = html.unescape(entity)
        if char == entity:
            return found.group(0)
        try:
            return char.replace("\n", " ").encode(codec)
        except UnicodeEncodeError:
            return found.group(0)

    return _ENTITY.sub(replace, text)


def _segments(blocks: Iterable[bytes]) -> Iterator[tuple[bytes, bytes, bytes]]:
    """(document id, segment id, raw text) of every segment, in order."""
    doc = b""
    pending = b""
    for block in blocks:
        data = pending + block
        end = 0
        for found in _ITEM.finditer(data):
            end = found.end()
            if found.group(1) is not None:
                doc = found.group(1)
                continue
            ident = _SEG_ID.search(found.group(2))
            text = found.group(3).strip()
            if b"\n" in text:
                text = _LINE_BREAKS.sub(b" ", text)
            yield doc, ident.group(1) if ident else b"", text
        rest = data[end:]
        opened = _OPEN_SEG.search(rest)
        if opened is None:  # at most a tag cut in two
            opened = re.search(rb"<[^>]*$", rest)
        pending = rest[opened.start() :] if opened else b""


def segment_texts(blocks: Iterable[bytes], codec: str) -> Iterator[bytes]:
    """The texts of an SGML file's segments, unescaped, in order."""
    for _, _, text in _segments(blocks):
        yield unescape(text, codec)


@contextlib.contextmanager
def _opened(url: str, wanted: str) -> Iterator[tuple[Iterator[bytes], str]]:
    with open_binary(url) as f:
        yield text_blocks(f, url, wanted)


@contextlib.contextmanager
def open_side(url: str, wanted: str) -> Iterator[Side]:
    """One side of a pair: an SGML file's segments, or a text file's lines."""
    if not is_sgml(url):
        with open_lines(url, wanted) as side:
            yield side
        return
    with _opened(url, wanted) as (blocks, encoding):
        codec = encodings.decoding_codec(encoding)
        yield Side(segment_texts(blocks, codec), encoding, "segments")


def _ids(url: str, wanted: str) -> Iterator[tuple[bytes, bytes]]:
    with _opened(url, wanted) as (blocks, _):
        count = 0
        for doc, seg, _ in _segments(blocks):
            count += 1
            yield doc, seg
        if count == 0:
            raise InputError(f"{url}: no <seg> elements (not a WMT SGML file?)")


def check_aligned(inp: CorpusInput) -> None:
    """Refuse a pair of SGML files whose segment counts or ids differ, in one line naming
    both (the first difference, or both counts)."""
    assert inp.tgt is not None
    src_ids, tgt_ids = _ids(inp.src, inp.encodings[0]), _ids(inp.tgt, inp.encodings[1])
    counts = [0, 0]
    for a, b in itertools.zip_longest(src_ids, tgt_ids):
        counts[0] += a is not None
        counts[1] += b is not None
        if a is not None and b is not None and a != b:
            raise CorpusAlignmentError(
                f"{inp.src} and {inp.tgt} differ at segment {counts[0]}: "
                f"{_name(a)} in one, {_name(b)} in the other"
            )
    if counts[0] != counts[1]:
        raise CorpusAlignmentError(
            f"{inp.src} has {counts[0]} segments but {inp.tgt} has {counts[1]}"
        )


def _name(ids: tuple[bytes, bytes]) -> str:
    doc, seg = (part.decode("utf-8", "replace") for part in ids)
    return f"document {doc or '?'} segment {seg or '?'}"


def chunks(inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk]:
    """The pairs of a file pair of which one side or both are SGML, checked first."""
    if inp.tgt is not None and is_sgml(inp.src) and is_sgml(inp.tgt):
        check_aligned(inp)
    yield from read_chunks(inp, chunk_lines, open_side)
