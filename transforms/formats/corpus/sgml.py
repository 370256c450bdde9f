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
segment ids; a pair whose segment counts or ids differ is refused, as it is read.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any

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
# A document's start (its id) or a whole segment (its id, its text), in order; the
# letters' cases spelled out and the text unrolled, which runs 2.6 times as fast as
# IGNORECASE and a lazy `.*?`.
_ITEM = re.compile(
    rb"<[dD][oO][cC]\b[^>]*?\b[dD][oO][cC][iI][dD]\s*=\s*[\"']?([^\"'\s>]+)[^>]*>"
    rb"|<[sS][eE][gG]\b(?:[^>]*?\b[iI][dD]\s*=\s*[\"']?([^\"'\s>]*))?[^>]*>"
    rb"([^<]*(?:<(?!/[sS][eE][gG])[^<]*)*)</[sS][eE][gG]\s*>"
)
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
            text = found.group(3).strip()
            if b"\n" in text:
                text = _LINE_BREAKS.sub(b" ", text)
            yield doc, found.group(2) or b"", text
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


def _name(ids: tuple[bytes, bytes]) -> str:
    doc, seg = (part.decode("utf-8", "replace") for part in ids)
    return f"document {doc or '?'} segment {seg or '?'}"


def _check(inp: CorpusInput, first: int, src: list, tgt: list, rest: tuple[Any, Any]) -> None:
    """Refuse the pair at the first segment whose ids differ, or if one file has more
    segments (counted from the rest of both), in one line naming both files."""
    for i, (a, b) in enumerate(zip(src, tgt)):  # noqa: B905 (the counts come next)
        if a[:2] != b[:2]:
            raise CorpusAlignmentError(
                f"{inp.src} and {inp.tgt} differ at segment {first + i}: "
                f"{_name(a[:2])} in one, {_name(b[:2])} in the other"
            )
    if len(src) != len(tgt):
        counts = (first - 1 + len(side) + sum(1 for _ in more) for side, more in
                  zip((src, tgt), rest, strict=True))  # fmt: skip
        raise CorpusAlignmentError(
            f"{inp.src} has {next(counts)} segments but {inp.tgt} has {next(counts)}"
        )


def _pair_chunks(inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk]:
    """A pair of SGML files in one pass, their ids compared chunk by chunk."""
    assert inp.tgt is not None
    with _opened(inp.src, inp.encodings[0]) as src, _opened(inp.tgt, inp.encodings[1]) as tgt:
        sides = _segments(src[0]), _segments(tgt[0])
        codecs = [encodings.decoding_codec(found) for _, found in (src, tgt)]
        first = 1
        while True:
            got = [list(itertools.islice(side, chunk_lines)) for side in sides]
            _check(inp, first, *got, sides)
            if not got[0]:
                if first == 1:
                    raise InputError(f"{inp.src}: no <seg> elements (not a WMT SGML file?)")
                return
            texts = (
                b"\n".join(unescape(text, codec) for _, _, text in side)
                for side, codec in zip(got, codecs, strict=True)
            )
            yield RawChunk(inp.origin, inp.role, first, *texts, inp.columns, (src[1], tgt[1]))
            first += len(got[0])


def chunks(inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk]:
    """The pairs of a file pair of which one side or both are SGML."""
    if inp.tgt is not None and is_sgml(inp.src) and is_sgml(inp.tgt):
        yield from _pair_chunks(inp, chunk_lines)
    else:
        yield from read_chunks(inp, chunk_lines, open_side)
