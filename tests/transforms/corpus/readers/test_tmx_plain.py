"""TMX's plain units read without Expat: what they read is what Expat reads, or nothing."""

from __future__ import annotations

from xml.parsers import expat

from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.corpus.readers import tmx_plain
from nmtpipe.transforms.corpus.readers.tmx import _parse

# Pieces of text: plain ones, and each thing that makes a text other than plain or no XML.
PLAIN = [
    "Tea",
    " ",
    "中文",
    "a > b",
    "&amp;",
    "&lt;i&gt;",
    "&#x4E2D;",
    "&#65;",
    "&#10;",
    "\n",
    "'\"",
]
HOSTILE = ["&", "&bogus;", "&#0;", "&#x110000;", "\r", "]]>", "\x01", "\ufffe", "<b>x</b>", "<"]
SPACE = ["", " ", "\n", "\t", "\u3000"]


@st.composite
def tmx_units(draw, hostile: bool) -> bytes:
    """Whole units of a TMX body, two or three variants each, as a fragment holds them."""
    pieces = PLAIN + HOSTILE if hostile else PLAIN
    langs = draw(st.lists(st.sampled_from(["en", "zh", "zh-CN", "EN"]), min_size=1, max_size=3))
    units = []
    for _ in range(draw(st.integers(1, 4))):
        order = draw(st.permutations(langs)) if hostile and draw(st.booleans()) else langs
        bad_attrs = [' a="1" a="2"', " tuid=1", '\u3000tuid="1"'] if hostile else []
        attrs = draw(st.sampled_from(["", ' tuid="1"', " a='x' b=\"y\"", *bad_attrs]))
        variants = []
        for lang in order:
            attr = draw(st.sampled_from(["xml:lang", "lang"]))
            text = "".join(draw(st.lists(st.sampled_from(pieces), max_size=4)))
            gap = draw(st.sampled_from(SPACE))
            variants.append(f'{gap}<tuv {attr}="{lang}"><seg>{text}</seg></tuv>')
        between = draw(st.sampled_from(SPACE + (["<!-- c -->", "x"] if hostile else [])))
        units.append(f"{between}<tu{attrs}>{''.join(variants)}</tu>")
    return "".join(units).encode()


def expat_reads(data: bytes) -> list[dict[str, str]] | None:
    units: list[dict[str, str]] = []
    try:
        _parse(data, units)
    except expat.ExpatError:
        return None
    return units


def as_units(found: tmx_plain.Columns) -> list[dict[str, str]]:
    """The columns as `_parse` gives units: each language's first variant."""
    units = []
    for i in range(len(found.texts[0])):
        unit: dict[str, str] = {}
        for code, texts in zip(found.codes, found.texts, strict=True):
            unit.setdefault(code, texts[i])
        units.append(unit)
    return units


@settings(max_examples=400, deadline=None)
@given(data=tmx_units(hostile=True))
def test_what_is_read_without_expat_is_what_expat_reads(data: bytes):
    found = tmx_plain.columns(data)
    if found is not None:
        assert as_units(found) == expat_reads(data)


@settings(max_examples=200, deadline=None)
@given(data=tmx_units(hostile=False))
def test_plain_units_of_the_same_variants_are_read_without_expat(data: bytes):
    found = tmx_plain.columns(data)
    assert found is not None and as_units(found) == expat_reads(data)


def test_what_is_left_to_expat():
    unit = '<tu><tuv xml:lang="en"><seg>{}</seg></tuv><tuv xml:lang="zh"><seg>中</seg></tuv></tu>'
    for text in ["a<b>c</b>", "a &nbsp; b", "a\rb", "x]]>", "&#0;"]:
        assert tmx_plain.columns(unit.format(text).encode()) is None, text
    other_order = unit.format("a") + unit.format("b").replace('"en"', '"EN"')
    assert tmx_plain.columns(other_order.encode()) is None
