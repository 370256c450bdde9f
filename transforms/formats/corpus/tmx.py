"""TMX translation memories (OPUS's `.tmx`, `.tmx.gz`), parsed in parallel as they stream.

A TMX is one XML document of `<tu>` units, each with a `<tuv xml:lang=…><seg>` per
language. Where it is planned, it is only cut: read a block at a time (decompressed, and
transcoded to UTF-8 when it is in another encoding), cut after its last complete unit,
its units counted, so that each `TmxFragment` of whole units knows the number of its
first. The workers that clean the chunks parse the fragments, each with Expat, whose
handlers keep only the texts of the unit being read (no tree is built: 2.5 times faster
than ElementTree's pull parser). So no process holds more than a fragment of a file of
many gigabytes, and the parsing, which costs more than the cutting by far, is shared by
every worker.

A unit's languages come from `xml:lang` (or TMX 1.1's `lang`), matched to the pair's in
any case and with any region (`zh-CN`, `zh_TW`, `ZH` are Chinese); the text of a `<seg>`
is its own and its `<hi>` runs', without the native codes of its inline markup (`<bpt>`,
`<ept>`, `<it>`, `<ph>`, `<ut>`). A unit lacking a language is a `bad-record` reject; a
record's number is its unit's (from 1). A fragment is parsed on its own, so entities
declared in a TMX's own DTD are unknown to it: TMX writers use XML's five and character
references.
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterator
from typing import Any, NamedTuple
from xml.parsers import expat

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats.corpus.fields import pick_language
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.encodings import UTF8
from nmtpipe.transforms.storage.inputs import CorpusInput
from nmtpipe.transforms.storage.raw_corpus import (
    RawChunk,
    Unread,
    open_binary,
    read_blocks,
    read_head,
)
from nmtpipe.transforms.text.filters import BAD_RECORD

# Read this many bytes at a time, where a TMX is cut into fragments.
TMX_BLOCK = 1 << 20
_UNIT_START = re.compile(rb"<tu[\s>/]")
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


def encoding_of(head: bytes) -> str:
    """The encoding a TMX declares (or its byte-order mark says), as reported."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    declared = _DECLARED.search(head[:200])
    return codecs.lookup(declared.group(1).decode()).name if declared else UTF8


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
    (`encoding`: the file's, as reported)."""

    inp: CorpusInput
    first_unit: int
    units: int
    data: bytes
    encoding: str


def _utf8_blocks(inp: CorpusInput, f: Any) -> tuple[Iterator[bytes], str]:
    """The file's bytes in blocks, as UTF-8, and its encoding as declared (or marked)."""
    head = read_head(f, inp.src, TMX_BLOCK)
    declared = encoding_of(head)
    blocks = itertools.chain([head], read_blocks(f, inp.src, TMX_BLOCK))
    if encodings.canonical(declared) != UTF8:
        blocks = encodings.transcoded(blocks, declared)
    return blocks, declared


def plan(inp: CorpusInput, chunk_units: int) -> Iterator[TmxFragment]:
    """The units of a TMX cut into fragments of about `chunk_units` units (at least a
    block's worth), not parsed."""
    with open_binary(inp.src) as f:
        blocks, declared = _utf8_blocks(inp, f)
        encoding = declared if encodings.transcodes(declared) else UTF8
        first, pending, parts, count = 1, b"", [], 0
        started = False
        for block in blocks:
            data = pending + block
            if not started:  # the prolog and the header go
                start = _UNIT_START.search(data)
                if start is None:
                    pending = data[-8:]
                    continue
                data, started = data[start.start() :], True
            end = _last_unit_end(data)
            pending, whole = data[end:], data[:end]
            if whole:
                parts.append(whole)
                count += len(_UNIT_START.findall(whole))
            if count >= chunk_units:
                yield TmxFragment(inp, first, count, b"".join(parts), encoding)
                first, parts, count = first + count, [], 0
        if _UNIT_START.search(pending):
            raise InputError(f"{inp.src}: tu {first + count} is not closed: the file is cut short")
        if count:
            yield TmxFragment(inp, first, count, b"".join(parts), encoding)


def _last_unit_end(data: bytes) -> int:
    """Where the last complete `</tu>` of `data` ends (0 if none does)."""
    found = data.rfind(b"</tu")
    while found >= 0:
        close = data.find(b">", found)
        if close >= 0 and data[found + 4 : close].strip() == b"":
            return close + 1
        found = data.rfind(b"</tu", 0, found)
    return 0


def _units(fragment: TmxFragment) -> list[dict[str, str]]:
    """A fragment's units, parsed; InputError where it is no well-formed XML, or holds
    another number of units than were counted (a `<tu` inside a comment or CDATA)."""
    inp = fragment.inp
    units: list[dict[str, str]] = []
    try:
        _parse(fragment.data, units)
    except expat.ExpatError as e:
        raise InputError(
            f"{inp.src}: not a well-formed TMX: {expat.ErrorString(e.code)} in tu "
            f"{fragment.first_unit + len(units)}"
        ) from None
    if len(units) != fragment.units:
        last = fragment.first_unit + fragment.units - 1
        raise InputError(
            f"{inp.src}: tu {fragment.first_unit} to {last}: {len(units)} units parsed "
            f"where {fragment.units} start (a '<tu' inside a comment or CDATA?)"
        )
    return units


def load(fragment: TmxFragment) -> RawChunk:
    """A fragment's units as a chunk of pairs (UTF-8, whatever the file's encoding)."""
    inp, first = fragment.inp, fragment.first_unit
    assert inp.fields is not None
    pick = _Picker(inp.fields)
    src: list[str] = []
    tgt: list[str] = []
    unread = []
    for i, variants in enumerate(_units(fragment)):
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
    blobs = ("\n".join(side).encode(UTF8, "surrogatepass") for side in (src, tgt))
    encoding = fragment.encoding
    return RawChunk(
        inp.origin, inp.role, first, *blobs, inp.columns, (encoding, encoding), tuple(unread)
    )
