"""TMX translation memories (OPUS's `.tmx`, `.tmx.gz`), parsed as they stream.

A TMX is one XML document of `<tu>` units, each with a `<tuv xml:lang=…><seg>` per
language. It is fed to Expat a block at a time, whose handlers keep only the texts of the
unit being read (no tree is built: 2.5 times faster than ElementTree's pull parser, whose
tree of each block would be dropped anyway), so a file of many gigabytes is parsed in
the memory of a block. A unit's languages come from `xml:lang` (or TMX 1.1's `lang`), matched to the
pair's in any case and with any region (`zh-CN`, `zh_TW`, `ZH` are Chinese); the text of
a `<seg>` is its own and its `<hi>` runs', without the native codes of its inline markup
(`<bpt>`, `<ept>`, `<it>`, `<ph>`, `<ut>`). A unit lacking a language is a `bad-record`
reject; a record's number is its unit's (from 1).
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterator
from typing import NamedTuple
from xml.parsers import expat

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats.corpus.fields import pick_language
from nmtpipe.transforms.storage import encodings
from nmtpipe.transforms.storage.encodings import UTF8
from nmtpipe.transforms.storage.inputs import CorpusInput
from nmtpipe.transforms.storage.raw_corpus import RawChunk, Unread, open_binary, read_blocks
from nmtpipe.transforms.text.filters import BAD_RECORD

# Fed to the parser this many bytes at a time: a block's units are what a parse holds.
TMX_BLOCK = 1 << 18
_TEXT_MARKUP = "hi"  # inline markup whose content is text of the sentence
_DECLARED = re.compile(rb"""<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")


class Unit(NamedTuple):
    """A unit's two texts (None where it has no variant of that language), and what is
    wrong with it."""

    src: str | None
    tgt: str | None
    problem: str | None = None


class _Picker:
    """The codes of a unit's variants that name the pair's two languages, remembered
    by the unit's codes (a TMX spells its languages the same way in every unit)."""

    def __init__(self, langs: tuple[str, str]) -> None:
        self.langs = langs
        self._seen: dict[tuple[str, ...], tuple[str | None, str | None, str | None]] = {}

    def __call__(self, variants: dict[str, str]) -> Unit:
        codes = tuple(variants)
        found = self._seen.get(codes)
        if found is None:
            found = self._seen[codes] = self._pick(codes)
        src, tgt, problem = found
        return Unit(
            None if src is None else variants[src], None if tgt is None else variants[tgt], problem
        )

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


class _Handlers:
    """Expat's handlers: each unit's texts by language code (the first `<tuv>` of each),
    its `<seg>`'s text and its `<hi>` runs' without its inline codes' (`<bpt>`, `<ept>`,
    `<it>`, `<ph>`, `<ut>`, and `<sub>` inside them), gathered in `units` as read."""

    def __init__(self, langs: tuple[str, str]) -> None:
        self.unit_of = _Picker(langs)
        self.units: list[Unit] = []
        self.count = 0  # units read
        self._variants: dict[str, str] = {}
        self._lang = ""
        self._parts: list[str] | None = None  # inside a <seg>: its texts so far
        self._codes = 0  # depth inside inline codes of a <seg>

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if self._parts is not None:
            if name != _TEXT_MARKUP:
                self._codes += 1
        elif name == "seg":
            self._parts = []
        elif name == "tuv":
            self._lang = attrs.get("xml:lang") or attrs.get("lang") or ""
        elif name == "tu":
            self._variants = {}

    def end(self, name: str) -> None:
        if self._parts is not None:
            if name == "seg":
                self._variants.setdefault(self._lang, "".join(self._parts))
                self._parts = None
            elif name != _TEXT_MARKUP:
                self._codes -= 1
        elif name == "tu":
            self.units.append(self.unit_of(self._variants))
            self.count += 1

    def text(self, data: str) -> None:
        if self._parts is not None and not self._codes:
            self._parts.append(data)


def _units(inp: CorpusInput) -> Iterator[Unit]:
    """Each unit, in order."""
    assert inp.fields is not None
    handlers = _Handlers(inp.fields)
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.StartElementHandler = handlers.start
    parser.EndElementHandler = handlers.end
    parser.CharacterDataHandler = handlers.text
    with open_binary(inp.src) as f:
        for block in itertools.chain(read_blocks(f, inp.src, TMX_BLOCK), [b""]):
            try:
                parser.Parse(block, not block)
            except expat.ExpatError as e:
                raise InputError(
                    f"{inp.src}: not a well-formed TMX: {expat.ErrorString(e.code)} at line "
                    f"{e.lineno}, column {e.offset} (after tu {handlers.count})"
                ) from None
            yield from handlers.units
            handlers.units = []


def declared_encoding(inp: CorpusInput) -> str:
    with open_binary(inp.src) as f:
        return encoding_of(f.read(256))


def chunks(inp: CorpusInput, chunk_units: int) -> Iterator[RawChunk]:
    """The units of a TMX, `chunk_units` at a time, as UTF-8 (a TMX in UTF-16 says so in
    its chunks' encodings, which are transcoded ones)."""
    declared = declared_encoding(inp)
    encoding = declared if encodings.transcodes(declared) else UTF8
    first = 1
    pending: list[Unit] = []

    def chunk() -> RawChunk:
        sides: tuple[list[str], list[str]] = ([], [])
        unread = []
        for i, unit in enumerate(pending):
            texts = [(text or "").replace("\n", " ") for text in (unit.src, unit.tgt)]
            if unit.problem is not None:
                raw = [None if t is None else t.encode(UTF8, "surrogatepass") for t in unit[:2]]
                unread.append(Unread(i, BAD_RECORD, f"tu {first + i}: {unit.problem}", *raw))
                texts = ["", ""]
            for side, text in zip(sides, texts, strict=True):
                side.append(text)
        src, tgt = ("\n".join(side).encode(UTF8, "surrogatepass") for side in sides)
        return RawChunk(
            inp.origin, inp.role, first, src, tgt, inp.columns, (encoding, encoding),
            tuple(unread),
        )  # fmt: skip

    for unit in _units(inp):
        pending.append(unit)
        if len(pending) == chunk_units:
            yield chunk()
            first += len(pending)
            pending = []
    if pending:
        yield chunk()
