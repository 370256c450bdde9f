"""TMX translation memories, parsed as they stream."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import pytest

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats.corpus import chunks, tmx
from nmtpipe.transforms.formats.corpus.tables import resolve_tables

LANGS = ("en", "zh")
HEAD = (
    '<?xml version="1.0" encoding="{encoding}"?>\n<tmx version="1.4">\n'
    '<header srclang="en" datatype="plaintext" segtype="sentence" adminlang="en" '
    'o-tmf="x" creationtool="t" creationtoolversion="1"/>\n<body>\n'
)


def tmx_text(units: list[str], encoding: str = "UTF-8") -> str:
    return HEAD.format(encoding=encoding) + "\n".join(units) + "\n</body>\n</tmx>\n"


def unit(en: str, zh: str, zh_code: str = "zh") -> str:
    return (
        f'<tu><tuv xml:lang="en"><seg>{en}</seg></tuv>'
        f'<tuv xml:lang="{zh_code}"><seg>{zh}</seg></tuv></tu>'
    )


def read(path: Path, chunk_units: int = 2, **how):
    (inp,) = resolve_tables(str(path), "train", LANGS, **how)
    return [c for p in chunks.plan(inp, chunk_units) for c in chunks.load(p)]


def pairs(found) -> list[tuple[int, str, str]]:
    out = []
    for c in found:
        sides = c.src.decode().split("\n"), c.tgt.decode().split("\n")
        out += [(c.first_line + i, *p) for i, p in enumerate(zip(*sides, strict=True))]
    return out


def test_units_languages_in_any_spelling_and_inline_markup(tmp_path: Path):
    units = [
        unit("Hello &amp; welcome.", "你好，欢迎。", "zh-CN"),
        unit('<bpt i="1">&lt;b&gt;</bpt>Bold<ept i="1">&lt;/b&gt;</ept> text<ph x="1">{1}</ph>.',
             "<hi>粗体</hi>文字。", "ZH"),
        '<tu><tuv lang="zh_TW"><seg>再見。</seg></tuv><tuv lang="EN-GB"><seg>Bye.</seg></tuv></tu>',
        unit("Line\none", "一\n行", "zh"),
    ]  # fmt: skip
    path = tmp_path / "opus.tmx"
    path.write_text(tmx_text(units), encoding="utf-8")
    assert pairs(read(path)) == [
        (1, "Hello & welcome.", "你好，欢迎。"),
        (2, "Bold text.", "粗体文字。"),
        (3, "Bye.", "再見。"),
        (4, "Line one", "一 行"),
    ]


def test_a_unit_without_both_languages_is_a_bad_record_by_its_number(tmp_path: Path):
    units = [
        unit("One.", "一。"),
        '<tu><tuv xml:lang="en"><seg>Only English.</seg></tuv></tu>',
        unit("Three.", "三。", "zh-CN") + unit("", "", "zh-TW")[:-5] + "</tu>",  # two Chinese
    ]
    path = tmp_path / "m.tmx"
    path.write_text(tmx_text(units), encoding="utf-8")
    found = read(path, chunk_units=10)
    assert [(u.index, u.reason, u.detail, u.src) for c in found for u in c.unread] == [
        (1, "bad-record", "tu 2: no single zh variant (it has en)", b"Only English."),
    ]


def test_languages_named_and_utf16_and_gzip(tmp_path: Path):
    units = [unit("One.", "一。", "zh-CN"), unit("Two.", "二。", "zh-CN")]
    path = tmp_path / "m.tmx.gz"
    path.write_bytes(gzip.compress(tmx_text(units, "UTF-16").encode("utf-16")))
    found = read(path, fields=("EN", "zh-cn"))
    assert pairs(found) == [(1, "One.", "一。"), (2, "Two.", "二。")]
    assert found[0].encodings == ("utf-16", "utf-16")  # transcoded: the chunk is UTF-8


def test_a_unit_that_is_no_xml_or_a_file_cut_short_is_refused_naming_it(tmp_path: Path):
    path = tmp_path / "bad.tmx"
    broken = '<tu><tuv xml:lang="en"><seg>b</tuv></tu>'
    path.write_text(tmx_text([unit("a", "b"), broken, unit("c", "d")]), encoding="utf-8")
    with pytest.raises(
        InputError, match=r"bad\.tmx: not a well-formed TMX: mismatched tag in tu 2$"
    ):
        read(path, chunk_units=1)
    path.write_text(tmx_text([unit("a", "b"), unit("c", "d")])[:-40], encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.tmx: tu 2 is not closed: the file is cut short"):
        read(path)


def _peak_memory(path: Path, units: int) -> int:
    """Write a TMX of `units` units at `path`; the most memory reading it took."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(HEAD.format(encoding="UTF-8"))
        for i in range(units):
            en, zh = f"Sentence number {i} of a large memory.", f"大型记忆库的第{i}句。"
            f.write(unit(en, zh) + "\n")
        f.write("</body></tmx>\n")
    (inp,) = resolve_tables(str(path), "train", LANGS)
    tracemalloc.start()
    try:
        fragments = tmx.plan(inp, 2_000)  # cut where planned, parsed where loaded
        assert sum(tmx.load(f).src.count(b"\n") + 1 for f in fragments) == units
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_tmx_is_parsed_in_the_memory_of_a_block(tmp_path: Path):
    small = _peak_memory(tmp_path / "small.tmx", 10_000)  # 1.5 MB
    large = _peak_memory(tmp_path / "large.tmx", 60_000)  # 9 MB
    assert large < 1.25 * small  # the same: a fragment and its units, not the file
