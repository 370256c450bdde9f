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

A pair of plain SGML files (uncompressed, on a filesystem read by byte ranges, in an
encoding whose markup is ASCII's) is read by many workers, as line-aligned files are
(`lines.py`), so that no worker reads a whole file and no text passes through a shuffle.
Spans of both files are measured (`measure`): their `<seg`, `</seg` and line ends
counted at memory speed, and where every MARK_EVERY-th segment starts, with the line it
is on and the document in effect there. No segment's text and no tag can hold a `<seg`,
`</seg` or `<doc` (`_ITEM`), so in a file the stream reads, these are its segments,
their closes and its documents. The planner sums the counts and cuts pieces of
`chunk_lines` segments at the same segment of both files (`SgmlPiece`); the worker that
cleans a piece reads each side from a marked `<seg` before it with the document and line
the stream has there, from the segment before its first (what lies between them, a
broken tag, is the piece's to refuse, as it is that chunk's in the stream), in blocks cut
where the stream's are (`_GRID`: what it carries over a block's end, and refuses past
MAX_SEGMENT, depends on them), and where its first read ends, at a marked `<seg` past
the piece (`_blocks_from`), and compares the ids as the stream does (`_chunks`).
Loaded in order, the pieces give the stream's chunks and refuse a broken file at its
first fault, naming the same file and line (a file broken in several pieces may be
refused, in a run, at a later fault first: each piece reports its own). A pair whose
files differ in segments, have none, or hold more or fewer `</seg` than `<seg` (a lost
`</seg>`, the commonest fault) is read as one stream where it is planned, which refuses
it as it always has; so is a pair whose consecutive segments may lie more than
MAX_SEGMENT apart, a compressed, archived or HTTP pair, one in UTF-16 or UTF-32, and
SGML beside a text file.
"""

from __future__ import annotations

import bisect
import contextlib
import html
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from nmtpipe.transforms.corpus.base import SurveyedReader
from nmtpipe.transforms.corpus.inputs import CorpusInput, file_name, without_compression
from nmtpipe.transforms.corpus.raw_corpus import (
    BLOCK_SIZE,
    UTF8_BOM,
    RawChunk,
    Side,
    found_encoding,
    open_binary,
    open_lines,
    read_block,
    read_chunks,
    read_head,
    text_blocks,
)
from nmtpipe.transforms.corpus.readers.lines import (
    MARK_EVERY,
    REQUEST_BYTES,
    MarkIndex,
    Span,
    opened,
    survey,
    unranged,
)
from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.encodings import UTF8

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


def _batches(
    blocks: Iterable[bytes], url: str, doc: bytes = b"", line: int = 1
) -> Iterator[_Batch]:
    """The segments of a file, in order, a block's at a time, read from a segment's start
    in document `doc` on line `line` (or from the file's start); InputError at a `<seg>`
    without its `</seg>` (another tag of the structure or the file's end comes first, or
    more than MAX_SEGMENT bytes), at a `</seg>` without its `<seg>` and at a tag without
    its `>`, once the segments before it are yielded. Each block is split once by
    `_SEG` and what lies between its matches is scanned once where it holds a `<`, with
    what it leaves unfinished (a segment, or a tag it cuts) carried to the next."""
    pending = b""  # `line`: the one `pending` starts on
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

    def __init__(self, blocks: Iterable[bytes], url: str, doc: bytes = b"", line: int = 1) -> None:
        self.batches, self.held = _batches(blocks, url, doc, line), _Batch([], [], [])

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


def _chunks(
    inp: CorpusInput, sides: list[_Segments], found: tuple[str, str], first: int, chunk_lines: int
) -> Iterator[RawChunk]:
    """The chunks of a pair's segments from segment `first` on (those `sides` read next),
    their ids compared chunk by chunk: a whole pair's, or a piece's (its first chunk, or
    for the last piece, all)."""
    codecs = [encodings.decoding_codec(encoding) for encoding in found]
    while True:
        got = [side.take(chunk_lines) for side in sides]
        _check(inp, first, *got, sides)
        if not got[0].texts:
            if first == 1:
                raise InputError(f"{inp.src}: no <seg> elements (not a WMT SGML file?)")
            return
        # One unescape a side: no entity spans the line breaks that join the texts.
        texts = (
            unescape(b"\n".join(side.texts), codec) for side, codec in zip(got, codecs, strict=True)
        )
        yield RawChunk(inp.origin, inp.role, first, *texts, inp.columns, found)
        first += len(got[0].texts)


def _pair_chunks(inp: CorpusInput, chunk_lines: int) -> Iterator[RawChunk]:
    """A pair of SGML files in one pass, their ids compared chunk by chunk."""
    assert inp.tgt is not None
    with _opened(inp.src, inp.encodings[0]) as src, _opened(inp.tgt, inp.encodings[1]) as tgt:
        sides = [_Segments(src[0], inp.src), _Segments(tgt[0], inp.tgt)]
        yield from _chunks(inp, sides, (src[1], tgt[1]), 1, chunk_lines)


class SegmentsMeasured(NamedTuple):
    """What a worker found in a span of an SGML file: the `<seg` and `</seg` that start in
    it (their `<` in it), where its last segment starts and the most bytes between two
    of its segments' starts, its line ends, where its first segment and every `every`-th
    after it start, with, for each, the line ends before it in the span and the document
    the span's last `<doc>` before it names (None: no `<doc>` before it in the span
    names one); the document its last `<doc>` names (None: none), and in the file's first
    span, the file's encoding."""

    segments: int
    closes: int
    last: int
    widest: int
    newlines: int
    marks: tuple[int, ...]
    states: tuple[tuple[int, bytes | None], ...]
    doc: bytes | None
    every: int
    encoding: str | None


class _Start(NamedTuple):
    """Where one side of a piece is read from: a segment's `<seg` (or the file's start),
    on line `line`, in document `doc`, past `skip` segments (the piece's first segment's
    predecessor included: what lies after it is the piece's to read), up to `until`, a
    marked `<seg` past the piece's last segment (or the file's end), read at once."""

    offset: int
    skip: int
    line: int
    doc: bytes
    until: int


class SgmlPiece(NamedTuple):
    """Segments `first` to `first + chunk_lines - 1` of a pair of plain SGML files (all
    from `first` on where `last`), each side read from its `_Start`."""

    inp: CorpusInput
    first: int
    chunk_lines: int
    last: bool
    starts: tuple[_Start, _Start]
    encodings: tuple[str, str]


# The bytes `\\b` takes for a word's (in a bytes pattern, ASCII's letters, digits and `_`).
_WORD = np.array([bytes([b]).isalnum() or b == ord("_") for b in range(256)])
# Bytes a measure reads past its span's part, so that a `<doc>` that starts in it is read
# whole: the stream reads no longer tag whole (at most a carried part and a block), and
# refuses the file at one.
_AHEAD = MAX_SEGMENT + max(BLOCK_SIZE, encodings.SAMPLE_BYTES)
# Where the blocks of a file's stream (`text_blocks`) end: its head's size, then each
# block's; a piece's reading cuts its blocks there too (`_blocks_from`).
_GRID = (encodings.SAMPLE_BYTES, BLOCK_SIZE)
_PAST = len(b"</seg") + 1  # bytes read after a `<` to tell what it starts
_ATTRS = re.compile(rb"[^<>]*")


def _named(following: np.ndarray, name: bytes) -> np.ndarray:
    """Which of some `<` start `name` as `_ITEM` sees it, from the bytes that follow each
    (a row of `following` for each byte after them): in any case, then a byte that ends
    a word (`<seg\\b`)."""
    hit = ~_WORD[following[len(name)]]
    for k, char in enumerate(name):
        fold = 0x20 if chr(char).isalpha() else 0  # a letter, in either case
        hit &= (following[k] | fold) == char
    return hit


def _documents(data: bytes, starts: list[int]) -> list[tuple[int, bytes]]:
    """Each `<doc` at `starts` of `data` that names a document, and the document it names,
    as `_scan` reads it (a `<doc>` that names none leaves the document as it was)."""
    named = []
    for start in starts:
        attrs = _ATTRS.match(data, start + len(b"<doc"))
        assert attrs is not None
        if found := _DOC_ID.search(attrs.group()):
            named.append((start, found.group(1)))
    return named


def measure(inp: CorpusInput, span: Span, every: int = MARK_EVERY) -> SegmentsMeasured:
    """A span's segment starts and closes, line ends, marks and the documents its
    `<doc>`s name, found at memory speed with numpy (but for each `<doc>`'s id); the
    side's encoding from its first bytes where the span is its first. Neither a
    segment's text nor a tag holds a `<seg`, `</seg` or `<doc`: in a file the stream
    reads, each `<seg` starts a segment, each `</seg` closes one and each `<doc`
    starts a document."""
    url = inp.urls()[span.side]
    encoding = None
    segments, closes, last, widest, newlines, doc = 0, 0, -1, 0, 0, None
    marks: list[int] = []
    states: list[tuple[int, bytes | None]] = []
    with opened(url) as f:
        if span.start == 0:
            head = read_head(f, url)
            whole = len(head) < encodings.SAMPLE_BYTES
            encoding = found_encoding(url, inp.encodings[span.side], head, whole)
        for at in range(span.start, span.end, REQUEST_BYTES):
            own = min(REQUEST_BYTES, span.end - at)
            f.seek(at)
            data = read_block(f, url, own + _AHEAD)
            view = np.frombuffer(data, dtype=np.uint8)
            if len(data) < own + _PAST:  # the file's end: no word goes on
                view = np.concatenate((view, np.zeros(_PAST, dtype=np.uint8)))
            ends = np.flatnonzero(view[:own] == ord("\n"))
            tags = np.flatnonzero(view[:own] == ord("<"))
            following = np.stack([view[tags + k] for k in range(1, _PAST + 1)])
            starts = tags[_named(following, b"seg")]
            docs = _documents(data, tags[_named(following, b"doc")].tolist())
            marked = starts[-segments % every :: every]  # their index in the span: a mark's
            lines = (np.searchsorted(ends, marked) + newlines).tolist()
            named = np.searchsorted([p for p, _ in docs], marked).tolist()  # docs before each
            states += zip(lines, (docs[k - 1][1] if k else doc for k in named), strict=True)
            marks += (marked + at).tolist()
            if len(starts):
                edges = np.diff(starts + at, prepend=starts[0] + at if last < 0 else last)
                last, widest = int(starts[-1] + at), max(widest, int(edges.max()))
            segments += len(starts)
            closes += int(np.count_nonzero(_named(following, b"/seg")))
            newlines += len(ends)
            doc = docs[-1][1] if docs else doc
    return SegmentsMeasured(
        segments, closes, last, widest, newlines, tuple(marks), tuple(states), doc, every, encoding
    )


def _located(
    spans: list[tuple[Span, SegmentsMeasured]],
) -> tuple[MarkIndex, dict[int, tuple[int, bytes]]]:
    """Where a side's segments start, as far as its marks tell (`MarkIndex`), and the
    line and document at each mark (and at the file's start)."""
    index = MarkIndex(((m.segments, m.marks, m.every) for _, m in spans), 0)
    states, line, doc = {0: (1, b"")}, 1, b""
    for _, m in spans:
        for offset, (before, named) in zip(m.marks, m.states, strict=True):
            states[offset] = (line + before, doc if named is None else named)
        line += m.newlines
        doc = doc if m.doc is None else m.doc
    return index, states


def _widest(spans: list[tuple[Span, SegmentsMeasured]]) -> int:
    """The most bytes between two consecutive segment starts of a side."""
    widest, last = 0, -1
    for _, m in spans:
        if m.segments:
            widest = max(widest, m.widest, m.marks[0] - last if last >= 0 else 0)
            last = m.last
    return widest


def _start(
    index: MarkIndex, states: dict[int, tuple[int, bytes]], size: int, first: int, count: int
) -> _Start:
    """Where a side's segments `first` (from 0) to `first + count - 1` are read from: the
    mark at or before the one before them (the file's start for the first), up to a
    marked `<seg` past them (or the file's end)."""
    offset, skip = index.locate(first - 1) if first else (0, -1)
    after = bisect.bisect_left(index.records, first + count)  # a mark past them, if any
    until = index.offsets[after] if after < len(index.offsets) else size
    return _Start(offset, skip + 1, *states[offset], until)


def _plan_pieces(
    inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Span, SegmentsMeasured]]
) -> Iterator[SgmlPiece | RawChunk]:
    """Pieces of `chunk_lines` segments of a pair of plain SGML files, cut at the same
    segment of both, from their measures; the pair read here as one stream, as it always
    was, where their segments differ in number, none is closed or a file has more or
    fewer closes, so that it is refused as that reading refuses it (at the first broken
    tag, the first ids that differ or the counts), and where a piece could not be read
    as the stream reads it: its files transcoded (UTF-16), or two consecutive segments
    more than MAX_SEGMENT apart (`_blocks_from`)."""
    by_side: list[list[tuple[Span, SegmentsMeasured]]] = [[], []]
    for span, found in sorted(measured):
        by_side[span.side].append((span, found))
    found = (by_side[0][0][1].encoding or UTF8, by_side[1][0][1].encoding or UTF8)
    counts = [sum(m.segments for _, m in side) for side in by_side]
    closes = [sum(m.closes for _, m in side) for side in by_side]
    if (
        counts[0] != counts[1]
        or not counts[0]
        or closes != counts
        or max(map(_widest, by_side)) > MAX_SEGMENT
        or any(map(encodings.transcodes, found))
    ):
        yield from _pair_chunks(inp, chunk_lines)
        return
    located = [(*_located(side), side[-1][0].end) for side in by_side]
    for first in range(0, counts[0], chunk_lines):
        count = min(chunk_lines, counts[0] - first)
        src, tgt = (_start(*side, first, count) for side in located)
        yield SgmlPiece(inp, 1 + first, chunk_lines, first + count == counts[0], (src, tgt), found)


def _boundary(offset: int) -> int:
    """Where the first block of a file's stream past `offset` ends (see `_GRID`)."""
    head, size = _GRID
    return head if offset < head else offset + size - (offset - head) % size


def _blocks_from(f: BinaryIO, url: str, start: int, until: int) -> Iterator[bytes]:
    """The bytes of `f` from `start` in the blocks of its stream (`text_blocks`), so that
    `_batches` carries and refuses what it reads as it does there, but for one that ends
    at `until`, a segment's `<seg` (the bytes up to it read at once): the segment before
    it starts at most MAX_SEGMENT before (`_plan_pieces`), so no more is carried there
    than the stream could carry, and all before it is read as the stream reads it."""
    f.seek(start)
    data, at = read_block(f, url, until - start), start
    while at < start + len(data):
        end = min(_boundary(at), until)
        yield data[at - start : end - start]
        at = end
    while block := read_block(f, url, _boundary(at) - at):
        yield block
        at += len(block)


def _side(f: BinaryIO, url: str, start: _Start, encoding: str) -> _Segments:
    """One file's segments from a piece's first on, as its stream reads them (the file's
    first block without its UTF-8 mark)."""
    blocks = _blocks_from(f, url, start.offset, start.until)
    if start.offset == 0 and encodings.decoding_codec(encoding) == UTF8:
        head = next(blocks, b"")
        blocks = itertools.chain([head.removeprefix(UTF8_BOM)], blocks)
    side = _Segments(blocks, url, start.doc, start.line)
    side.take(start.skip)
    return side


def _load_piece(piece: SgmlPiece) -> Iterator[RawChunk]:
    """A piece's segments as the pair's stream reads them: one chunk, or for the last,
    all that remain, refused at the same tag, ids or counts."""
    inp = piece.inp
    assert inp.tgt is not None
    with opened(inp.src) as src, opened(inp.tgt) as tgt:
        files = zip((src, tgt), inp.urls(), piece.starts, piece.encodings, strict=True)
        sides = [_side(*file) for file in files]
        chunks = _chunks(inp, sides, piece.encodings, piece.first, piece.chunk_lines)
        yield from chunks if piece.last else itertools.islice(chunks, 1)


class SgmlReader(SurveyedReader):
    """A pair of files of which one side or both are SGML: a pair of plain SGML files
    measured in spans, then read in pieces of segments by the workers that clean them;
    any other read where it is planned, its segments numbered by reading."""

    NAME = "sgml"
    PAIRED = True
    SUFFIXES = SUFFIXES
    SPLIT = (
        "plain files: spans whose segments workers count, then pieces of segments read by "
        "the workers that clean them; compressed, archived, HTTP, UTF-16, beside a text file "
        "or with unmatched segments: streamed by one worker"
    )

    def whole(self, inp: CorpusInput) -> str | None:
        if inp.tgt is None or not (is_sgml(inp.src) and is_sgml(inp.tgt)):
            return "SGML beside a text file"
        return next(filter(None, map(unranged, inp.urls())), None)

    def survey(self, inp: CorpusInput) -> list[Span]:
        return [] if self.whole(inp) else survey(inp)

    def measure(self, inp: CorpusInput, part: Any) -> SegmentsMeasured:
        return measure(inp, part)

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[SgmlPiece | RawChunk]:
        if measured:
            return _plan_pieces(inp, chunk_lines, measured)
        if inp.tgt is not None and is_sgml(inp.src) and is_sgml(inp.tgt):
            return _pair_chunks(inp, chunk_lines)
        return read_chunks(inp, chunk_lines, open_side)

    def load(self, piece: Any) -> Iterator[RawChunk]:
        return _load_piece(piece) if isinstance(piece, SgmlPiece) else iter((piece,))
