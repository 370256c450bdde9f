"""TMX units in the plain form OPUS and most exporters write, read by C-speed splits and
scans: Expat's handlers in Python cost a TMX twice what its pairs cost as line-aligned
files (benchmarks/RESULTS.md).

The plain form: units `<tu …>` whose variants are each `<tuv xml:lang="…"><seg>TEXT
</seg></tuv>`, TEXT without markup, with only XML's five entities and character
references, no carriage return (XML turns line ends into `\\n`) and no `]]>`; nothing
but white space between units. A fragment whose units are all in that form, each with
the variants of the first in the same order (a TMX of two languages), reads here
exactly as Expat reads it (`tmx._parse`; tested against it on generated TMX); any other
is None, for Expat to read, or to refuse where it is not well-formed XML.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

_S = "[ \t\n]"  # white space in a tag (a carriage return is never plain)
_NAME = r"[A-Za-z_:][-A-Za-z0-9_.:]*"
_VALUE = rf"""{_S}*={_S}*(?:"[^"<&]*"|'[^'<&]*')"""
# A variant, split on: what lies between variants is the units' tags (and text that
# Expat's reading ignores, as between tags).
_VARIANT = re.compile(
    rf'<tuv{_S}+(?:xml:)?lang="([A-Za-z0-9_.-]*)"{_S}*>\s*<seg>([^<]*)</seg>\s*</tuv>'
)
_OPEN = rf"\s*<tu((?:{_S}+{_NAME}{_VALUE})*){_S}*>\s*"
_CLOSE = rf"\s*</tu{_S}*>"
_FIRST, _BETWEEN, _LAST = (re.compile(p) for p in (_OPEN, _CLOSE + _OPEN, _CLOSE + r"\s*"))
_ATTRIBUTES = re.compile(rf"{_S}+({_NAME}){_VALUE}")
_NOT_AN_ENTITY = re.compile(rb"&(?!(?:lt|gt|amp|quot|apos|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});)")
_REFERENCE = re.compile(r"&(lt|gt|amp|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


class Columns(NamedTuple):
    """Units that all have the same variants in the same order: their language codes,
    and each variant's texts, unit by unit."""

    codes: tuple[str, ...]
    texts: list[list[str]]


def columns(data: bytes) -> Columns | None:
    """The texts of `data`'s units (whole units, UTF-8) as `tmx._parse` reads them (a line
    break a space); None unless every unit is in the plain form with the variants of the
    first, in its order."""
    if not _plain_bytes(data):
        return None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    if "\ufffe" in text or "\uffff" in text:  # characters XML does not allow
        return None
    pieces = _VARIANT.split(text)
    gaps, codes, segs = pieces[0::3], pieces[1::3], pieces[2::3]
    if not codes or not _opens(_FIRST, gaps[0]) or not _LAST.fullmatch(gaps[-1]):
        return None
    starts_unit = {}  # each kind of gap between two variants: whether a unit starts there
    for gap in set(gaps[1:-1]):
        if gap.isspace() or not gap:
            starts_unit[gap] = False
        elif _opens(_BETWEEN, gap):
            starts_unit[gap] = True
        else:
            return None
    starts = list(map(starts_unit.__getitem__, gaps[1:-1]))
    width = starts.index(True) + 1 if True in starts else len(codes)
    units = len(codes) // width
    if starts != ([False] * (width - 1) + [True]) * (units - 1) + [False] * (width - 1):
        return None
    if len(codes) != units * width or any(codes[k::width].count(codes[k]) != units
                                          for k in range(width)):  # fmt: skip
        return None
    texts = []
    for k in range(width):
        column = [t if "&" not in t and "\n" not in t else _text(t) for t in segs[k::width]]
        if None in column:
            return None
        texts.append(column)
    return Columns(tuple(codes[:width]), texts)  # type: ignore[arg-type]


def _plain_bytes(data: bytes) -> bool:
    """Whether `data` holds no control character XML does not allow, no carriage return,
    no `]]>` and no ampersand that starts no entity it has; by numpy's scans (one
    regular expression of them all is ten times slower, and `bytes.count` and `in`
    three times, on text where `>` and `\\xef` abound)."""
    found = np.frombuffer(data, dtype=np.uint8)
    controls = np.count_nonzero(found < 0x20)
    if controls != np.count_nonzero(found == ord("\n")) + np.count_nonzero(found == ord("\t")):
        return False
    brackets = np.flatnonzero(found[:-2] == ord("]"))
    if ((found[brackets + 1] == ord("]")) & (found[brackets + 2] == ord(">"))).any():
        return False
    return b"&" not in data or _NOT_AN_ENTITY.search(data) is None


def _opens(tag: re.Pattern[str], gap: str) -> bool:
    """Whether `gap` is what `tag` matches, opening a unit whose tag names no attribute
    twice (no well-formed XML)."""
    found = tag.fullmatch(gap)
    if found is None:
        return False
    names = _ATTRIBUTES.findall(found.group(1))
    return len(set(names)) == len(names)


def _text(seg: str) -> str | None:
    """A `<seg>`'s text with its references resolved, a line break a space; None for a
    reference to a character XML does not allow."""
    if "&" in seg:
        try:
            seg = _REFERENCE.sub(_resolved, seg)
        except ValueError:
            return None
    return seg.replace("\n", " ") if "\n" in seg else seg


def _resolved(reference: re.Match[str]) -> str:
    name = reference.group(1)
    if name[0] != "#":
        return _NAMED[name]
    code = int(name[2:], 16) if name[1] == "x" else int(name[1:])
    if not (code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD
            or 0x10000 <= code <= 0x10FFFF):  # fmt: skip
        raise ValueError(f"no character &{name};")
    return chr(code)
