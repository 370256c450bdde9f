"""TMX translation memories, parsed as they stream."""

from __future__ import annotations

import gzip
import html
import tracemalloc
from pathlib import Path

import pytest

from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.readers import tmx
from nmtpipe.transforms.corpus.readers.lines import survey
from nmtpipe.transforms.corpus.tables import resolve_tables
from nmtpipe.transforms.errors import InputError

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
    return [c for p in registry.plan(inp, chunk_units) for c in registry.load(p)]


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


@pytest.mark.parametrize("encoding", ["x-nonsense", "base64"])
def test_an_encoding_python_cannot_read_is_refused_naming_it(tmp_path: Path, encoding):
    path = tmp_path / "m.tmx"
    path.write_text(tmx_text([unit("One.", "一。")], encoding), encoding="utf-8")
    with pytest.raises(InputError) as refused:
        read(path)
    assert (
        str(refused.value) == f"{path}: declares the encoding {encoding}, which Python cannot read"
    )


@pytest.mark.parametrize(
    "zh",
    # Chinese in Latin-1 is character references: read in Latin-1 all the same
    [["Süß.", "Ça."], ["&#x751C;&#x3002;", "&#x8336;!"]],
)
def test_a_latin1_tmx_is_read_and_recorded_in_latin1(tmp_path: Path, zh):
    """Its chunks record the encoding the file was read in, which the statistics report,
    and hold the texts as Expat gave them, in UTF-8."""
    path = tmp_path / "m.tmx"
    units = [unit("Café crème.", zh[0]), unit("Naïve.", zh[1])]
    path.write_bytes(tmx_text(units, "ISO-8859-1").encode("latin-1"))
    (chunk,) = read(path)
    assert chunk.encodings == ("iso8859-1", "iso8859-1") and chunk.decoded
    assert chunk.src.decode().split("\n") == ["Café crème.", "Naïve."]
    assert chunk.tgt.decode().split("\n") == [html.unescape(text) for text in zh]


def test_a_tmx_without_the_languages_is_refused_naming_its_codes(tmp_path: Path):
    path = tmp_path / "m.tmx"
    path.write_text(tmx_text([unit("One.", "Un.", "fr"), unit("Two.", "Deux.", "FR-ca")]))
    with pytest.raises(InputError) as refused:
        read(path)
    assert str(refused.value) == (
        f"{path}: no zh variant in tu 1 to 2 (their xml:lang codes: FR-ca, en, fr); name its "
        "languages with --table-columns SRC,TGT"
    )


def test_a_unit_too_long_is_a_too_long_reject_in_place(tmp_path: Path):
    """Whether it lies inside a block or spans several, a unit of more than MAX_UNIT
    bytes is left out where the TMX is cut: the units after it keep their numbers."""
    long, huge = unit("y" * tmx.MAX_UNIT, "二。"), unit("x" * (3 << 20), "四。")
    units = [unit("One.", "一。"), long, unit("Three.", "三。"), huge, unit("Five.", "五。")]
    path = tmp_path / "m.tmx"
    path.write_text(tmx_text(units), encoding="utf-8")
    for chunk_units in (1, 2, 10):
        found = read(path, chunk_units)
        kept = [p for p in pairs(found) if p[1]]
        assert kept == [(1, "One.", "一。"), (3, "Three.", "三。"), (5, "Five.", "五。")]
        rejects = [(c.first_line + u.index, u.reason, u.detail, u.src, u.tgt)
                   for c in found for u in c.unread]  # fmt: skip
        assert rejects == [
            (n, "too-long", f"tu {n}: {len(text.encode()):,} bytes, more than a unit may have "
             "(262,144)", None, None) for n, text in ((2, long), (4, huge))
        ]  # fmt: skip


def _cut(path: Path) -> list[tmx.TmxFragment] | InputError:
    """The fragments of the TMX at `path`, or the error that refuses it."""
    (inp,) = resolve_tables(str(path), "train", LANGS)
    try:
        return list(tmx.plan(inp, 10))
    except InputError as e:
        return e


def _peak_cutting(path: Path, text: bytes) -> tuple[int, list[tmx.TmxFragment] | InputError]:
    """The most memory cutting a TMX of `text` took, and its fragments or its error."""
    path.write_bytes(text)
    tracemalloc.start()
    try:
        found = _cut(path)
        return tracemalloc.get_traced_memory()[1], found
    finally:
        tracemalloc.stop()


def test_cutting_is_linear_whatever_the_markup(tmp_path: Path):
    """16 MiB in a unit, closed or not: cut a block at a time, at most MAX_UNIT bytes
    carried from one to the next, where the whole unit was buffered, and copied again
    with each block."""
    words = "word " * ((16 << 20) // 5)
    head = HEAD.format(encoding="UTF-8") + unit("One.", "一。") + "\n"
    long = unit(words, "二。")
    text = head + long + "\n" + unit("Three.", "三。") + "\n</body></tmx>\n"
    peak, fragments = _peak_cutting(tmp_path / "long.tmx", text.encode())
    assert peak < 8 * tmx.TMX_BLOCK  # a few blocks, not the unit's 16 MiB (twice)
    too_long = ((2, len(long.encode())),)
    assert [(f.first_unit, f.units, f.too_long) for f in fragments] == [(1, 3, too_long)]
    text = head + "<tu><tuv xml:lang='en'><seg>" + words
    peak, error = _peak_cutting(tmp_path / "open.tmx", text.encode())
    assert peak < 8 * tmx.TMX_BLOCK
    assert str(error) == f"{tmp_path / 'open.tmx'}: tu 2 is not closed: the file is cut short"


@pytest.mark.parametrize(("span_bytes", "every"), [(97, 1), (4096, 3), (1 << 25, 256)])
def test_pieces_of_measured_spans_read_what_the_stream_cuts(tmp_path: Path, span_bytes, every):
    """A plain TMX read in pieces by many workers, wherever its spans cut its units
    (inside a tag's `<tu`, inside a unit too long to keep), gives the records, numbers
    and rejects of the same TMX cut by one worker."""
    long = unit("y" * tmx.MAX_UNIT, "二。")
    units = [unit(f"Line {i} &amp; <hi>more</hi>.", f"第{i}行。") for i in range(40)]
    units[7:8] = [long, "<!-- a comment -->", unit("Odd.", "奇。", zh_code="de")]
    path = tmp_path / "s.tmx"
    path.write_text(tmx_text(units), encoding="utf-8")
    (inp,) = resolve_tables(str(path), "train", LANGS)
    streamed = [tmx.load(f) for f in tmx.plan(inp, 5)]
    spans = survey(inp, span_bytes)
    measured = [(s, tmx.measure(inp, s, every)) for s in spans]
    pieces = list(registry.plan(inp, 5, measured))
    assert all(isinstance(p.part, tmx.TmxPiece) and p.part.skip < every for p in pieces)
    loaded = [c for p in pieces for c in registry.load(p)]
    assert pairs(loaded) == pairs(streamed) and len(pairs(loaded)) == 41
    rejects = [(c.first_line + u.index, u.reason) for c in loaded for u in c.unread]
    assert rejects == [(8, "too-long"), (9, "bad-record")]
