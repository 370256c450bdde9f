"""TMX translation memories (OPUS's `.tmx`, `.tmx.gz`), parsed in parallel as they stream.

A TMX is one XML document of `<tu>` units, each with a `<tuv xml:lang=…><seg>` per
language. Where it is planned, it is only cut: read a block at a time (decompressed, and
transcoded to UTF-8 when it is in another encoding), cut after its last complete unit,
its units counted, so that each `TmxFragment` of whole units knows the number of its
first. The workers that clean the chunks parse the fragments, each with Expat, whose
handlers keep only the texts of the unit being read (no tree is built: 2.5 times faster
than ElementTree's pull parser), where the units are not all in the plain form read
faster still by splits (`tmx_plain.py`). So no process holds more than a
fragment of a file of many gigabytes, and the parsing, which costs more than the cutting
by far, is shared by every worker.

A unit's languages come from `xml:lang` (or TMX 1.1's `lang`), matched to the pair's in
any case and with any region (`zh-CN`, `zh_TW`, `ZH` are Chinese); the text of a `<seg>`
is its own and its `<hi>` runs', without the native codes of its inline markup (`<bpt>`,
`<ept>`, `<it>`, `<ph>`, `<ut>`). A unit lacking a language is a `bad-record` reject; a
TMX none of whose first units has one of the languages is refused, naming the codes it
has. A record's number is its unit's (from 1). A fragment is parsed on its own, so
entities declared in a TMX's own DTD are unknown to it: TMX writers use XML's five and
character references.

Cutting is linear in the file whatever its markup: each block is scanned once, and a
unit of more than `MAX_UNIT` bytes (one that never closes, or a huge one) is skipped as
it streams, a `too-long` reject, never buffered. A TMX in an encoding other than UTF-8
is transcoded for Expat; its chunks hold the texts Expat gives, in UTF-8, and record
the file's encoding, which the statistics report.
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple
from xml.parsers import expat

import numpy as np

from nmtpipe.transforms.corpus.base import SurveyedReader, TableReader
from nmtpipe.transforms.corpus.fields import matches, pick_language
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import (
    BAD_RECORD,
    TOO_LONG,
    RawChunk,
    Unread,
    open_binary,
    read_blocks,
    read_head,
)
from nmtpipe.transforms.corpus.readers import tmx_plain
from nmtpipe.transforms.corpus.readers.lines import (
    REQUEST_BYTES,
    MarkIndex,
    Span,
    blocks_until,
    opened,
    survey,
    unranged,
)
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.encodings import UTF8

# Read this many bytes at a time, where a TMX is cut into fragments.
TMX_BLOCK = 1 << 20
# Bytes a unit may have: room for a variant of twice the longest line the filters keep
# by default (1,024 characters; 4 bytes a character at most) in each of 24 languages (as
# DGT-TM's units have), with markup; a larger unit is a `too-long` reject, not buffered.
MAX_UNIT = 1 << 18
# A span's measure records where every MARK_EVERY-th unit starts, so that a piece's
# reader finds its first unit past fewer others.
MARK_EVERY = 1 << 8
_UNIT_START = re.compile(rb"<tu[\s>/]")
_AFTER_TU = np.zeros(256, dtype=bool)  # the bytes `_UNIT_START` takes after `<tu`
_AFTER_TU[list(b" \t\n\r\f\v>/")] = True
_START = len(b"<tu ")
_UNIT_END = re.compile(rb"</tu\s*>")
_CUT_END = len(b"</tu >")  # bytes kept of a block skipped, where a tag may be cut
_LANGUAGE = re.compile(rb"<tuv\b[^<>]*?\s(?:xml:)?lang\s*=\s*[\"']([^\"'<>]*)[\"']")
_TEXT_MARKUP = "hi"  # inline markup whose content is text of the sentence
_DECLARED = re.compile(rb"""<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")


class _Picker:
    """The codes of a unit's variants that name the pair's two languages, and what is
    wrong if none or two do, remembered by the unit's codes (a TMX spells its languages
    the same way in every unit)."""

    def __init__(self, langs: tuple[str, str]) -> None:
        self.langs = langs
        self._seen: dict[tuple[str, ...], tuple[str | None, str | None, str | None]] = {}

    def __call__(self, codes: tuple[str, ...]) -> tuple[str | None, str | None, str | None]:
        found = self._seen.get(codes)
        if found is None:
            found = self._seen[codes] = self._pick(codes)
        return found

    def _pick(self, codes: tuple[str, ...]) -> tuple[str | None, str | None, str | None]:
        src, tgt = (pick_language(list(codes), lang) for lang in self.langs)
        missing = [lang for lang, code in zip(self.langs, (src, tgt), strict=True) if not code]
        if not missing:
            return src, tgt, None
        has = ", ".join(codes) or "none"
        return src, tgt, f"no single {' or '.join(missing)} variant (it has {has})"


def encoding_of(head: bytes, url: str) -> str:
    """The encoding a TMX declares (or its byte-order mark says), as Python names it
    (GBK as GB18030, ASCII as UTF-8); InputError for one Python cannot read text in."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    declared = _DECLARED.search(head[:200])
    if declared is None:
        return UTF8
    name = declared.group(1).decode()
    try:
        "".encode(name)  # a codec of text: not base64 or zlib
    except LookupError:
        raise InputError(f"{url}: declares the encoding {name}, which Python cannot read") from None
    return encodings.canonical(name)


def _parse(data: bytes, units: list[dict[str, str]]) -> None:
    """Each unit's texts by language code (the first `<tuv>` of each), of whole units of
    XML, appended to `units` as they are read: a `<seg>`'s text and its `<hi>` runs',
    without its inline codes' (`<bpt>`, `<ept>`, `<it>`, `<ph>`, `<ut>`, and `<sub>`
    inside them), a line break a space. Expat's handlers are closures over the unit
    being read (attributes as lists): a fifth faster than methods of an object and a
    record per unit. ExpatError as Expat raises it."""
    variants: dict[str, str] = {}
    lang = ""
    parts: list[str] | None = None  # inside a <seg>: its texts so far
    codes = 0  # depth inside inline codes of a <seg>

    def start(name: str, attrs: list[str]) -> None:
        nonlocal variants, lang, parts, codes
        if parts is not None:
            if name != _TEXT_MARKUP:
                codes += 1
        elif name == "seg":
            parts = []
        elif name == "tuv":
            named = dict(zip(attrs[::2], attrs[1::2], strict=True))
            lang = named.get("xml:lang") or named.get("lang") or ""
        elif name == "tu":
            variants = {}

    def end(name: str) -> None:
        nonlocal parts, codes
        if parts is not None:
            if name == "seg":
                if lang not in variants:
                    text = "".join(parts)
                    variants[lang] = text.replace("\n", " ") if "\n" in text else text
                parts = None
            elif name != _TEXT_MARKUP:
                codes -= 1
        elif name == "tu":
            units.append(variants)

    def text(data: str) -> None:
        if parts is not None and not codes:
            parts.append(data)

    parser = expat.ParserCreate("utf-8")
    parser.buffer_text = True
    parser.ordered_attributes = True
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.Parse(b"<body>" + data + b"</body>", True)


class TmxFragment(NamedTuple):
    """Whole units of a TMX, as UTF-8 XML: units `first_unit` to `first_unit + units - 1`
    (`encoding`: the file's), but for those of more than MAX_UNIT bytes, left out:
    `too_long` (their numbers and sizes)."""

    inp: CorpusInput
    first_unit: int
    units: int
    data: bytes
    encoding: str
    too_long: tuple[tuple[int, int], ...] = ()


def _utf8_blocks(inp: CorpusInput, f: Any) -> tuple[Iterator[bytes], str]:
    """The file's bytes in blocks, as UTF-8, and its encoding as declared (or marked)."""
    head = read_head(f, inp.src, TMX_BLOCK)
    declared = encoding_of(head, inp.src)
    blocks = itertools.chain([head], read_blocks(f, inp.src, TMX_BLOCK))
    if declared != UTF8:
        blocks = _transcoded(blocks, declared, inp.src)
    return blocks, declared


def _transcoded(blocks: Iterable[bytes], encoding: str, url: str) -> Iterator[bytes]:
    """`blocks` in `encoding` as UTF-8; InputError at bytes that `encoding` cannot
    decode (a code page's undefined byte), which Expat could not be given."""
    try:
        yield from encodings.transcoded(blocks, encoding)
    except UnicodeDecodeError as e:
        raise InputError(f"{url}: not {encoding}, as it declares: {e.reason}") from None


def plan(inp: CorpusInput, chunk_units: int) -> Iterator[TmxFragment]:
    """The units of a TMX cut into fragments of about `chunk_units` units (at least a
    block's worth), not parsed; InputError if the first fragment with units to parse
    lacks one of the languages."""
    with open_binary(inp.src) as f:
        blocks, encoding = _utf8_blocks(inp, f)
        checked = False
        for fragment in _fragments(inp, _cut(blocks, inp.src), chunk_units, encoding):
            if not checked and fragment.units > len(fragment.too_long):
                _check_languages(fragment)
                checked = True
            yield fragment


def _fragments(
    inp: CorpusInput,
    pieces: Iterable[tuple[bytes, int] | int],
    chunk_units: int,
    encoding: str,
) -> Iterator[TmxFragment]:
    """The pieces `_cut` gives, in fragments of at least `chunk_units` units."""
    first, parts, count, too_long = 1, [], 0, []
    for piece in pieces:
        if isinstance(piece, int):
            too_long.append((first + count, piece))
            count += 1
        else:
            parts.append(piece[0])
            count += piece[1]
        if count >= chunk_units:
            yield TmxFragment(inp, first, count, b"".join(parts), encoding, tuple(too_long))
            first, parts, count, too_long = first + count, [], 0, []
    if count:
        yield TmxFragment(inp, first, count, b"".join(parts), encoding, tuple(too_long))


class UnitsMeasured(NamedTuple):
    """What a worker found in a span of a TMX: how many units start in it, where its
    first and every `every`-th after it start, and (in the file's first span) the
    encoding the file declares."""

    units: int
    marks: tuple[int, ...]
    every: int
    encoding: str | None


class TmxPiece(NamedTuple):
    """Units `first_unit` to `first_unit + units - 1` of a plain UTF-8 TMX, found by
    reading from byte `start` (a unit's start, or the file's) past `skip` units."""

    inp: CorpusInput
    first_unit: int
    units: int
    start: int
    skip: int


def measure(inp: CorpusInput, span: Span, every: int = MARK_EVERY) -> UnitsMeasured:
    """The units that start in a span (their `<` in it: the span is read a tag's start
    past its end), and every `every`-th's offset."""
    with opened(inp.src) as f:
        encoding = (
            encoding_of(read_head(f, inp.src, TMX_BLOCK), inp.src) if not span.start else None
        )
        f.seek(span.start)
        count, marks, carry, at = 0, [], b"", span.start  # at: where `carry` starts
        for block in blocks_until(f, inp.src, span.end - span.start + _START - 1, REQUEST_BYTES):
            data = carry + block
            starts = unit_starts(data) + at
            starts = starts[starts < span.end]
            marks += starts[-count % every :: every].tolist()
            count += starts.size
            keep = min(len(data), _START - 1)  # where a unit's start may be cut
            carry, at = data[len(data) - keep :], at + len(data) - keep
    return UnitsMeasured(count, tuple(marks), every, encoding)


def _plan_pieces(
    inp: CorpusInput, chunk_units: int, measured: list[tuple[Span, UnitsMeasured]]
) -> Iterator[TmxPiece]:
    index = MarkIndex(((m.units, m.marks, m.every) for _, m in measured), 0)
    for first in range(0, index.counted, chunk_units):
        units = min(chunk_units, index.counted - first)
        yield TmxPiece(inp, first + 1, units, *index.locate(first))


def _load_piece(piece: TmxPiece) -> RawChunk:
    """A piece's units cut from the file as the planner of a stream cuts them, and
    parsed; the first piece's languages checked."""
    url = piece.inp.src
    with opened(url) as f:
        f.seek(piece.start)
        cut = _cut(read_blocks(f, url, TMX_BLOCK), url, piece.first_unit - piece.skip)
        fragment = _taken(piece, cut)
    if piece.first_unit == 1 and fragment.units > len(fragment.too_long):
        _check_languages(fragment)
    return load(fragment)


def _taken(piece: TmxPiece, pieces: Iterable[tuple[bytes, int] | int]) -> TmxFragment:
    """The fragment of a piece's units, from the runs and long units `_cut` gives past
    its start (a run split between units where the piece starts or ends in it)."""
    skip, wanted = piece.skip, piece.units
    parts, too_long, count = [], [], 0
    for cut in pieces:
        if isinstance(cut, int):
            if skip:
                skip -= 1
                continue
            too_long.append((piece.first_unit + count, cut))
            count += 1
        else:
            run, units = cut
            take = min(units - min(skip, units), wanted - count)
            begin = _unit_start(run, skip) if skip < units else len(run)
            end = _unit_start(run, skip + take) if skip + take < units else len(run)
            skip = max(0, skip - units)
            parts.append(run[begin:end])
            count += take
        if count == wanted:
            break
    return TmxFragment(piece.inp, piece.first_unit, count, b"".join(parts), UTF8, tuple(too_long))


def _check_languages(fragment: TmxFragment) -> None:
    """Refuse a TMX whose fragment has no variant in one of the pair's languages, in one
    line naming the codes it has: such a TMX has other languages (its units have the
    same ones throughout), or they were named wrong."""
    inp = fragment.inp
    assert inp.fields is not None
    codes = sorted({code.decode("utf-8", "replace") for code in _LANGUAGE.findall(fragment.data)})
    missing = [lang for lang in inp.fields if not any(matches(code, lang) for code in codes)]
    if missing:
        last = fragment.first_unit + fragment.units - 1
        raise InputError(
            f"{inp.src}: no {' or '.join(missing)} variant in tu {fragment.first_unit} to "
            f"{last} (their xml:lang codes: {', '.join(codes) or 'none'}); name its "
            "languages with --table-columns SRC,TGT"
        )


def _cut(blocks: Iterable[bytes], url: str, first: int = 1) -> Iterator[tuple[bytes, int] | int]:
    """The units of a TMX's body in order, the first numbered `first` (in messages):
    runs of whole units (their bytes, and how many start in them), and for each unit of
    more than MAX_UNIT bytes, its size, the unit skipped as it streams. Each block is
    scanned once, at most MAX_UNIT bytes of an unfinished unit carried to the next."""
    pending, started, skipped, units = b"", False, None, 0  # skipped: a long unit's bytes
    for block in blocks:
        data = pending + block
        if not started:  # the prolog and the header go
            start = _UNIT_START.search(data)
            if start is None:
                pending = data[-8:]
                continue
            data, started = data[start.start() :], True
        while True:
            if skipped is not None:  # inside a unit too long to keep
                end = _UNIT_END.search(data)
                if _UNIT_START.search(data, 0, end.start() if end else len(data)):
                    raise InputError(
                        f"{url}: tu {first + units} is not closed before tu {first + units + 1}"
                    )
                if end is None:
                    pending = data[-_CUT_END:]
                    skipped += len(data) - len(pending)
                    break
                yield skipped + end.end()
                data, skipped, units = data[end.end() :], None, units + 1
            end = _last_unit_end(data)
            for piece in _runs(data[:end]):
                units += 1 if isinstance(piece, int) else piece[1]
                yield piece
            data = data[end:]
            start = _UNIT_START.search(data)
            if start is not None and len(data) - start.end() > MAX_UNIT:
                data, skipped = data[start.end() :], start.end() - start.start()
                continue
            pending = data
            if start is None and len(data) > MAX_UNIT:  # between units: space, a comment
                pending = data[-_CUT_END:]  # where a unit's start may be cut
            break
    if skipped is not None or _UNIT_START.search(pending):
        raise InputError(f"{url}: tu {first + units} is not closed: the file is cut short")


def _runs(whole: bytes) -> Iterator[tuple[bytes, int] | int]:
    """Whole units as runs of those of at most MAX_UNIT bytes (their bytes, with what
    lies between them, and how many) and the sizes of the others, in order."""
    at = unit_starts(whole)
    if int(np.diff(at, prepend=0, append=len(whole)).max(initial=0)) <= MAX_UNIT:
        if whole:  # no unit too long: all as one run
            yield whole, at.size
        return
    starts = at.tolist()
    pos, done = 0, 0  # where the next run starts, and its first unit
    for k, start in enumerate(starts):
        limit = starts[k + 1] if k + 1 < len(starts) else len(whole)
        if limit - start <= MAX_UNIT:
            continue
        end = _UNIT_END.search(whole, start, limit)
        stop = end.end() if end else limit
        if stop - start > MAX_UNIT:
            if k > done:
                yield whole[pos:start], k - done
            yield stop - start
            pos, done = stop, k + 1
    if pos < len(whole):  # units, or what Expat is to refuse (a `</tu>` without its `<tu>`)
        yield whole[pos:], len(starts) - done


def _unit_start(run: bytes, k: int) -> int:
    """Where unit `k` (from 0) of a run starts: the first by one search, so that the runs
    inside a piece, taken whole, are not scanned again (`_runs` scanned them)."""
    if k == 0:
        found = _UNIT_START.search(run)
        assert found is not None, "a run holds its units"
        return found.start()
    return int(unit_starts(run)[k])


def unit_starts(data: bytes) -> np.ndarray:
    """Where `_UNIT_START` matches in `data`, found at memory speed: a `<` followed by
    `tu` and a byte it takes (no two such matches can overlap)."""
    found = np.frombuffer(data, dtype=np.uint8)
    lt = np.flatnonzero(found[:-3] == ord("<"))
    lt = lt[(found[lt + 1] == ord("t")) & (found[lt + 2] == ord("u"))]
    return lt[_AFTER_TU[found[lt + 3]]]


def _last_unit_end(data: bytes) -> int:
    """Where the last complete `</tu>` of `data` ends (0 if none does)."""
    found = data.rfind(b"</tu")
    while found >= 0:
        end = _UNIT_END.match(data, found)
        if end:
            return end.end()
        found = data.rfind(b"</tu", 0, found)
    return 0


def _units(fragment: TmxFragment) -> list[dict[str, str]]:
    """A fragment's units, parsed (but those too long to keep); InputError where it is no
    well-formed XML, or holds another number of units than were counted (a `<tu` inside a
    comment or CDATA)."""
    inp = fragment.inp
    units: list[dict[str, str]] = []
    try:
        _parse(fragment.data, units)
    except expat.ExpatError as e:
        raise InputError(
            f"{inp.src}: not a well-formed TMX: {expat.ErrorString(e.code)} in tu "
            f"{_number(fragment, len(units))}"
        ) from None
    if len(units) != fragment.units - len(fragment.too_long):
        last = fragment.first_unit + fragment.units - 1
        raise InputError(
            f"{inp.src}: tu {fragment.first_unit} to {last}: {len(units)} units parsed "
            f"where {fragment.units - len(fragment.too_long)} start (a '<tu' inside a "
            "comment or CDATA?)"
        )
    return units


def _number(fragment: TmxFragment, k: int) -> int:
    """The number of a fragment's `k`-th parsed unit (from 0): its too long units are
    not parsed."""
    number = fragment.first_unit + k
    for skipped, _ in fragment.too_long:  # in order
        if skipped <= number:
            number += 1
    return number


def load(fragment: TmxFragment) -> RawChunk:
    """A fragment's units as a chunk of pairs, in UTF-8 (`RawChunk.decoded`)."""
    inp, first = fragment.inp, fragment.first_unit
    assert inp.fields is not None
    pick = _Picker(inp.fields)
    plain = None if fragment.too_long else tmx_plain.columns(fragment.data)
    if plain is not None and len(plain.texts[0]) == fragment.units:
        src_code, tgt_code, problem = pick(plain.codes)
        if problem is None:  # the units' codes are those of every unit
            assert src_code is not None and tgt_code is not None
            texts = plain.texts
            return _chunk(fragment, texts[plain.codes.index(src_code)],
                          texts[plain.codes.index(tgt_code)], [])  # fmt: skip
    too_long = dict(fragment.too_long)
    parsed = iter(_units(fragment))
    src: list[str] = []
    tgt: list[str] = []
    unread = []
    for i in range(fragment.units):
        size = too_long.get(first + i)
        if size is not None:
            detail = f"tu {first + i}: {size:,} bytes, more than a unit may have ({MAX_UNIT:,})"
            unread.append(Unread(i, TOO_LONG, detail, None, None))
            src.append("")
            tgt.append("")
            continue
        variants = next(parsed)
        src_code, tgt_code, problem = pick(tuple(variants))
        if problem is None:
            src.append(variants[src_code])  # type: ignore[index]
            tgt.append(variants[tgt_code])  # type: ignore[index]
            continue
        raw = (None if c is None else variants[c].encode(UTF8, "surrogatepass")
               for c in (src_code, tgt_code))  # fmt: skip
        unread.append(Unread(i, BAD_RECORD, f"tu {first + i}: {problem}", *raw))
        src.append("")
        tgt.append("")
    return _chunk(fragment, src, tgt, unread)


def _chunk(fragment: TmxFragment, src: list[str], tgt: list[str], unread: list[Unread]) -> RawChunk:
    inp = fragment.inp
    blobs = ("\n".join(side).encode(UTF8, "surrogatepass") for side in (src, tgt))
    found = (fragment.encoding, fragment.encoding)
    return RawChunk(
        inp.origin, inp.role, fragment.first_unit, *blobs, inp.columns, found, tuple(unread), True
    )


class TmxReader(SurveyedReader, TableReader):
    """TMX files: a plain UTF-8 one surveyed in spans whose units workers count, then
    read in pieces of whole units by the workers that clean them; another (compressed,
    archived, in another encoding) cut into fragments of whole units by one worker and
    parsed by the workers that clean them."""

    NAME = "tmx"
    SUFFIXES = (".tmx",)
    SPLIT = (
        "plain UTF-8 files: spans whose units workers count, then pieces of whole units "
        "read by the workers that clean them; compressed or archived: cut into fragments by "
        "one worker, parsed by the workers that clean them"
    )

    def fields(self, inp: CorpusInput) -> None:
        return None  # a unit's variants are told by language

    def whole(self, inp: CorpusInput) -> str | None:
        return unranged(inp.src)

    def survey(self, inp: CorpusInput) -> list[Span]:
        return survey(inp)

    def measure(self, inp: CorpusInput, part: Any) -> UnitsMeasured:
        return measure(inp, part)

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[TmxPiece | TmxFragment]:
        ordered = sorted(measured)
        if not ordered or ordered[0][1].encoding != UTF8:  # a stream, or to transcode
            return plan(inp, chunk_lines)
        return _plan_pieces(inp, chunk_lines, ordered)

    def load(self, piece: Any) -> Iterator[RawChunk]:
        yield _load_piece(piece) if isinstance(piece, TmxPiece) else load(piece)
