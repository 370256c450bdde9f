"""WMT's SGML test sets (`newsdev2017-enzh-src.en.sgm`), plain or inside archives.

WMT's files before 2021 are SGML in name only (sacreBLEU calls them fake SGML: an `&` is
not always escaped), so they are read as T2T and sacreBLEU read them, by pattern rather
than by an SGML parser: the text between each `<seg …>` and its `</seg>`, in order,
stripped, with its entities (`&amp;`, `&lt;`, `&quot;`, `&#39;`, ...) unescaped, which
T2T and sacreBLEU leave as they are. A segment split over lines is joined with a space.
The work is done on blocks of bytes in the file's own encoding (the markup is ASCII, which
no byte of a character of an ASCII-compatible encoding can be), so that decoding stays the
cleaner's, line by line. A block is split by one regular expression on the segments in
the form WMT writes them (`<seg id="…">TEXT</seg>` on one line, no `<` in TEXT), their ids
and texts taken as lists; what lies between two of them is read tag by tag (the tags of
the set's structure, `<doc>`, `<p>`, `<seg>`, ..., found by another), as every file was
before, only where it holds a `<`: a document's start, and whatever is unusual or broken.

A `<seg>` whose text would hold such a tag has lost its `</seg>`: the file is refused,
naming the line, rather than two segments kept as one with markup inside. So is a
segment of more than `MAX_SEGMENT` bytes, so that the reading stays linear in the file
whatever its markup: each block is split once and scanned at most once, with at most one
segment carried over.

The source and reference files of a set have different names but the same documents and
segment ids; a pair whose segment counts or ids differ is refused, as it is read (the ids
compared a chunk's at a time, as lists).
"""

from __future__ import annotations

import contextlib
import html
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from nmtpipe.transforms.corpus.base import Reader
from nmtpipe.transforms.corpus.inputs import CorpusInput, file_name, without_compression
from nmtpipe.transforms.corpus.raw_corpus import (
    RawChunk,
    Side,
    open_binary,
    open_lines,
    read_chunks,
    text_blocks,
)
from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings

SUFFIXES = (".sgm", ".sgml")
# Bytes a segment may hold: a thousand times the longest line the filters keep by
# default; a `<seg>` longer than that has lost its `</seg>` (a block's worth, the most
# carried from one block to the next).
MAX_SEGMENT = 1 << 20
_TOO_LONG = f"holds more than {MAX_SEGMENT:,} bytes (its </seg> missing?)"
_NAMES = rb"seg|doc|p|hl|srcset|refset|tstset"  # the tags of a set's structure
# In any case, a whole segment (its attributes, its text, which holds no such tag), else
# one tag: `/` if it closes, its name, its attributes and `>` (none where the tag runs
# into another or the block ends: cut, or broken). Whole segments first: a segment is
# one match.
_ITEM = re.compile(
    rb"<seg\b([^<>]*)>([^<]*(?:<(?!/?(?:" + _NAMES + rb")\b)[^<]*)*)</seg\b[^<>]*>"
    rb"|<(/?)(" + _NAMES + rb")\b([^<>]*)(>?)",
    re.IGNORECASE,
)
# A whole segment in the form WMT writes it, on one line, no more than MAX_SEGMENT bytes:
# where `_ITEM` finds a whole segment too, with the same id (`_SEG_ID`'s) and text.
_SEG = re.compile(rb'<seg id="([^"\'\s<>]*)">([^<\n]{0,%d})</seg>' % MAX_SEGMENT, re.IGNORECASE)
_SEG_TAGS = len(b'<seg id=""></seg>')  # the bytes of a `_SEG` match beside its groups
_DOC_ID = re.compile(rb"\bdocid\s*=\s*[\"']?([^\"'\s>]+)", re.IGNORECASE)
_SEG_ID = re.compile(rb"\bid\s*=\s*[\"']?([^\"'\s>]*)", re.IGNORECASE)
# Longest start of a tag that the end of a block may cut before its name is whole.
_CUT_NAME = len(b"</srcset")
_SHOWN_ID = 40  # bytes of a segment's id a message shows at most
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


class _Batch(NamedTuple):
    """Consecutive segments of one file: the id of each one's document, its own id and
    its text (stripped, a line break a space, its entities as they are)."""

    docs: list[bytes]
    ids: list[bytes]
    texts: list[bytes]


def _batches(blocks: Iterable[bytes], url: str) -> Iterator[_Batch]:
    """The segments of a file, in order, a block's at a time; InputError at a `<seg>`
    without its `</seg>` (another tag of the structure or the file's end comes first, or
    more than MAX_SEGMENT bytes), at a `</seg>` without its `<seg>` and at a tag without
    its `>`, once the segments before it are yielded. Each block is split once by
    `_SEG` and what lies between its matches is scanned once where it holds a `<`, with
    what it leaves unfinished (a segment, or a tag it cuts) carried to the next."""
    doc, pending, line = b"", b"", 1  # `line`: the one `pending` starts on
    for block in itertools.chain(blocks, [None]):  # None: the file has ended
        data = pending + (block or b"")
        batch = _Batch([], [], [])
        try:
            doc, cut = _read(data, block is None, doc, line, url, batch)
        except InputError:
            if batch.texts:
                yield batch
            raise
        if batch.texts:
            yield batch
        line += data.count(b"\n", 0, cut)
        pending = data[cut:]


def _read(
    data: bytes, final: bool, doc: bytes, line: int, url: str, batch: _Batch
) -> tuple[bytes, int]:
    """The segments of `data` (starting on `line`, in document `doc`) appended to
    `batch`; the document at its end, and where the part to read again with the next
    block starts. `_SEG`'s matches are whole segments to `_ITEM` too, and none of
    `_ITEM`'s matches spans one, so what lies between two (a gap) reads the same alone."""
    pieces = _SEG.split(data)  # a gap, then each match's id and text and the gap after it
    gaps = pieces[0::3]
    tail = len(gaps) - 1  # the gap after the last match: where the block may cut a tag
    marked = {gap for gap in set(gaps[:tail]) if b"<" in gap}
    run, pos = 0, 0  # the first segment not yet appended, and where the gap before it starts
    for i in (i for i, gap in enumerate(gaps[:tail]) if gap in marked) if marked else ():
        _append(batch, pieces, run, i, doc)
        pos += sum(map(len, pieces[3 * run : 3 * i])) + _SEG_TAGS * (i - run)
        doc, _ = _scan(data, pos, pos + len(gaps[i]), final, doc, line, url, batch)
        run = i
    _append(batch, pieces, run, tail, doc)
    return _scan(data, len(data) - len(gaps[tail]), len(data), final, doc, line, url, batch)


def _append(batch: _Batch, pieces: list[bytes], first: int, end: int, doc: bytes) -> None:
    """Append `_SEG`'s matches `first` to `end` (not included) of `pieces` to `batch`."""
    batch.docs.extend(itertools.repeat(doc, end - first))
    batch.ids.extend(pieces[3 * first + 1 : 3 * end : 3])
    batch.texts.extend(map(bytes.strip, pieces[3 * first + 2 : 3 * end : 3]))


def _scan(
    data: bytes, pos: int, end: int, final: bool, doc: bytes, line: int, url: str, batch: _Batch
) -> tuple[bytes, int]:
    """`data[pos:end]` read tag by tag (`_ITEM`), its segments appended to `batch`; the
    document at its end and, where `end` is the end of `data`, where to cut it (see
    `_read`); a gap between two segments ends where the next starts."""
    opened: re.Match[bytes] | None = None  # a `<seg>` whose `</seg>` is to come
    found, cut = None, None
    for found in _ITEM.finditer(data, pos, end):
        attrs, text = found.group(1, 2)
        if text is not None and opened is None:  # a whole segment
            if len(text) > MAX_SEGMENT:
                raise _broken(url, line, data, found, _TOO_LONG)
            seg_id = _SEG_ID.search(attrs)
            text = text.strip()
            if b"\n" in text:
                text = _LINE_BREAKS.sub(b" ", text)
            batch.docs.append(doc)
            batch.ids.append(seg_id.group(1) if seg_id else b"")
            batch.texts.append(text)
            continue
        closing, name, attrs, closed = _parts(found)
        if not closed and not final and found.end() == len(data):
            cut = found.start()  # cut by the block's end: read again with the next
            break
        if opened is not None:  # a whole segment would have matched at `opened`
            where = f"{_shown(found)} on line {_line(line, data, found)}"
            raise _broken(url, line, data, opened, f"has no </seg> before the {where}")
        if not closed:
            raise _broken(url, line, data, found, "has no '>'")
        elif name.lower() == b"seg":
            if closing:
                raise _broken(url, line, data, found, "has no <seg> before it")
            opened = found
        elif name.lower() == b"doc" and not closing:
            doc_id = _DOC_ID.search(attrs)
            doc = doc_id.group(1) if doc_id else doc
    if end < len(data):  # a gap: a segment of the form `_SEG` finds comes next
        if opened is not None:
            following = _ITEM.match(data, end)
            assert following is not None
            where = f"{_shown(following)} on line {_line(line, data, following)}"
            raise _broken(url, line, data, opened, f"has no </seg> before the {where}")
        return doc, end
    if final:
        if opened is not None:
            raise _broken(url, line, data, opened, "has no </seg> (the file ends first)")
        return doc, len(data)
    if opened is not None:
        cut = opened.start()
    elif cut is None:  # the start of a tag's name, perhaps
        last_end = found.end() if found else pos
        tail = data.rfind(b"<", max(last_end, len(data) - _CUT_NAME))
        cut = len(data) if tail < 0 else tail
    if len(data) - cut > MAX_SEGMENT:
        carried = opened or _ITEM.match(data, cut)
        raise _broken(url, line, data, carried, _TOO_LONG if opened else "has no '>'")
    return doc, cut


def _parts(found: re.Match[bytes]) -> tuple[bytes, bytes, bytes, bytes]:
    """`/` if it closes, name, attributes and `>` of a tag, or of a whole segment's
    `<seg>` (`_ITEM`)."""
    if found.group(2) is not None:
        return b"", b"seg", found.group(1), b">"
    return found.group(3, 4, 5, 6)


def _line(line: int, data: bytes, tag: re.Match[bytes]) -> int:
    """The line `tag` starts on, `data` starting on `line`."""
    return line + data.count(b"\n", 0, tag.start())


def _shown(tag: re.Match[bytes]) -> str:
    """A tag as messages show it: `<seg id=4>`, `</p>`, `<doc` (one without its `>`)."""
    closing, name, attrs, closed = _parts(tag)
    found = _SEG_ID.search(attrs) if name.lower() == b"seg" and not closing else None
    seg_id = b" id=" + found.group(1)[:_SHOWN_ID] if found else b""
    return (b"<" + closing + name + seg_id + closed).decode("utf-8", "replace")


def _broken(url: str, line: int, data: bytes, tag: re.Match[bytes], why: str) -> InputError:
    """The error that refuses a file at `tag`, in one line naming the file and the line."""
    return InputError(f"{url}: line {_line(line, data, tag)}: {_shown(tag)} {why}")


def segment_texts(blocks: Iterable[bytes], codec: str, url: str) -> Iterator[bytes]:
    """The texts of the segments of the SGML file at `url`, unescaped, in order."""
    for batch in _batches(blocks, url):
        for text in batch.texts:
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
        yield Side(segment_texts(blocks, codec, url), encoding, "segments")


def _name(ids: tuple[bytes, bytes]) -> str:
    doc, seg = (part.decode("utf-8", "replace") for part in ids)
    return f"document {doc or '?'} segment {seg or '?'}"


class _Segments:
    """One file's segments, taken as they are wanted: no block is read, and no error
    raised, before a segment of it is."""

    def __init__(self, blocks: Iterable[bytes], url: str) -> None:
        self.batches, self.held = _batches(blocks, url), _Batch([], [], [])

    def take(self, n: int) -> _Batch:
        """The next `n` segments (fewer where the file ends first)."""
        held = self.held
        while len(held.texts) < n and (batch := next(self.batches, None)) is not None:
            for mine, more in zip(held, batch, strict=True):
                mine += more
        self.held = _Batch(*(column[n:] for column in held))
        return _Batch(*(column[:n] for column in held))

    def count_rest(self) -> int:
        """How many segments are left (all read)."""
        return len(self.held.texts) + sum(len(batch.texts) for batch in self.batches)


def _check(inp: CorpusInput, first: int, src: _Batch, tgt: _Batch, sides: list[_Segments]) -> None:
    """Refuse the pair at the first segment whose ids differ, or if one file has more
    segments (counted from the rest of both), in one line naming both files."""
    both = min(len(src.ids), len(tgt.ids))
    if src.ids[:both] != tgt.ids[:both] or src.docs[:both] != tgt.docs[:both]:
        i = next(i for i in range(both) if (src.docs[i], src.ids[i]) != (tgt.docs[i], tgt.ids[i]))
        raise CorpusAlignmentError(
            f"{inp.src} and {inp.tgt} differ at segment {first + i}: "
            f"{_name((src.docs[i], src.ids[i]))} in one, {_name((tgt.docs[i], tgt.ids[i]))} "
            "in the other"
        )
    if len(src.ids) != len(tgt.ids):
        counts = (first - 1 + len(got.ids) + side.count_rest() for got, side in
                  zip((src, tgt), sides, strict=True))  # fmt: skip
        raise CorpusAlignmentError(
            f"{inp.src} has {next(counts)} segments but {inp.tgt} has {next(counts)}"
        )


def _pair_chunks(inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk]:
    """A pair of SGML files in one pass, their ids compared chunk by chunk."""
    assert inp.tgt is not None
    with _opened(inp.src, inp.encodings[0]) as src, _opened(inp.tgt, inp.encodings[1]) as tgt:
        sides = [_Segments(src[0], inp.src), _Segments(tgt[0], inp.tgt)]
        codecs = [encodings.decoding_codec(found) for _, found in (src, tgt)]
        first = 1
        while True:
            got = [side.take(chunk_lines) for side in sides]
            _check(inp, first, *got, sides)
            if not got[0].texts:
                if first == 1:
                    raise InputError(f"{inp.src}: no <seg> elements (not a WMT SGML file?)")
                return
            # One unescape a side: no entity spans the line breaks that join the texts.
            texts = (
                unescape(b"\n".join(side.texts), codec)
                for side, codec in zip(got, codecs, strict=True)
            )
            yield RawChunk(inp.origin, inp.role, first, *texts, inp.columns, (src[1], tgt[1]))
            first += len(got[0].texts)


class SgmlReader(Reader):
    """A pair of files of which one side or both are SGML. Read where it is planned: a
    segment's number is known only by reading the segments before it."""

    NAME = "sgml"
    PAIRED = True
    SUFFIXES = SUFFIXES
    SPLIT = "streamed by one worker (segments are numbered by reading)"

    def whole(self, inp: CorpusInput) -> str:
        return "SGML segments are numbered by reading"

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[RawChunk]:
        if inp.tgt is not None and is_sgml(inp.src) and is_sgml(inp.tgt):
            return _pair_chunks(inp, chunk_lines)
        return read_chunks(inp, chunk_lines, open_side)
