"""WMT's SGML sets: segments in order, entities unescaped, pairs checked."""

from __future__ import annotations

import contextlib
import functools
import gzip
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import UTF8_BOM, RawChunk, found_encoding
from nmtpipe.transforms.corpus.readers import sgml
from nmtpipe.transforms.corpus.readers.lines import survey
from nmtpipe.transforms.corpus.readers.sgml import is_sgml, segment_texts, unescape
from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.storage import encodings
from tests.helpers import sgml_set, shared_lines, write_tgz

SgmlPair = functools.partial(CorpusInput, reader="sgml")

DOCS = ["d1", "d1", "d2"]


def records(inp: CorpusInput, chunk_lines: int = 2) -> list[tuple[int, bytes, bytes]]:
    out = []
    for planned in registry.plan(inp, chunk_lines):
        for chunk in registry.load(planned):
            pairs = zip(chunk.src.split(b"\n"), chunk.tgt.split(b"\n"), strict=True)
            out += [(chunk.first_line + i, s, t) for i, (s, t) in enumerate(pairs)]
    return out


def segments(blocks: Iterable[bytes], url: str = "x.sgm") -> list[tuple[bytes, bytes, bytes]]:
    """(document id, segment id, text) of each segment `sgml._batches` reads."""
    return [seg for batch in sgml._batches(blocks, url) for seg in zip(*batch, strict=True)]


def test_segments_in_order_unescaped_as_wmt_writes_them(tmp_path: Path):
    en = ['He said "no" & left.', "a < b", "Plain."]
    zh = ["他说“不”就走了。", "a 小于 b", "平常。"]
    (tmp_path / "dev-src.en.sgm").write_bytes(sgml_set(en, DOCS, "en", ref=False))
    (tmp_path / "dev-ref.zh.sgm").write_bytes(sgml_set(zh, DOCS, "zh", ref=True))
    assert b"&quot;no&quot; &amp; left" in (tmp_path / "dev-src.en.sgm").read_bytes()
    inp = SgmlPair("valid", str(tmp_path / "dev-src.en.sgm"), str(tmp_path / "dev-ref.zh.sgm"))
    got = records(inp)
    assert [(n, s.decode(), t.decode()) for n, s, t in got] == [
        (1, en[0], zh[0]),
        (2, en[1], zh[1]),
        (3, en[2], zh[2]),
    ]


def test_fake_sgml_as_wmt_ships_it():
    lines = [
        b'<srcset setid="x" srclang="any">',
        b'<doc sysid="ref" docid="a-document-id-long-enough-to-be-cut" genre="news" origlang="en">',
        b"<p>",
        b'<seg id="1"> AT&T &#x4e2d;&#25991; &eacute; &bogus; </seg>',  # a bare & kept
        b'<seg id="2">two</seg><seg id="3">three</seg>',  # two on a line
        b'<SEG id="4">split',  # over two lines, upper case
        b"here</seg>",
        b'<seg id="5"></seg>',  # empty: a record all the same
        b"</p></doc></srcset>",
    ]
    text = b"\n".join(lines)
    blocks = [text[i : i + 5] for i in range(0, len(text), 5)]  # cut anywhere
    got = list(segment_texts(blocks, "utf-8", "x.sgm"))
    ids = [(doc, seg) for doc, seg, _ in segments(blocks)]
    assert ids == [(b"a-document-id-long-enough-to-be-cut", str(n).encode()) for n in range(1, 6)]
    assert got == ["AT&T 中文 é &bogus;".encode(), b"two", b"three", b"split here", b""]


def test_entities_are_written_in_the_files_encoding():
    assert unescape(b"&#20013; &amp;", "gb18030") == "中 &".encode("gb18030")
    assert unescape(b"&#10;x", "utf-8") == b" x"  # a line break would split the record
    assert unescape(b"&#x1F600;", "big5") == b"&#x1F600;"  # Big5 cannot: kept


def test_gzipped_sgml_inside_an_archive_and_plain_text_against_sgml(tmp_path: Path):
    en = shared_lines("ntrex128-enzh", "en")[:5]
    zh = shared_lines("ntrex128-enzh", "zh")[:5]
    docs = shared_lines("ntrex128-enzh", "docid")[:5]
    archive = write_tgz(
        tmp_path / "dev.tgz",
        {
            "dev/a-src.en.sgm.gz": gzip.compress(sgml_set(en, docs, "en", ref=False)),
            "dev/a-ref.zh.sgm": sgml_set(zh, docs, "zh", ref=True),
        },
    )
    assert is_sgml(f"tar://dev/a-src.en.sgm.gz::{archive}")
    inp = SgmlPair(
        "valid", f"tar://dev/a-src.en.sgm.gz::{archive}", f"tar://dev/a-ref.zh.sgm::{archive}"
    )
    assert [s.decode() for _, s, _ in records(inp)] == en
    (tmp_path / "ref.zh").write_text("\n".join(zh) + "\n", encoding="utf-8")
    mixed = SgmlPair("valid", f"tar://dev/a-src.en.sgm.gz::{archive}", str(tmp_path / "ref.zh"))
    assert [t.decode() for _, _, t in records(mixed)] == zh


def test_a_gb18030_sgml_file_is_found_and_kept_in_its_encoding(tmp_path: Path):
    zh = shared_lines("tatoeba-cmn", "zh")[2000:2300]
    en = shared_lines("tatoeba-cmn", "en")[2000:2300]
    docs = ["d"] * len(zh)
    (tmp_path / "s.en.sgm").write_bytes(sgml_set(en, docs, "en", ref=False))
    (tmp_path / "r.zh.sgm").write_bytes(
        sgml_set(zh, docs, "zh", ref=True).decode().encode("gb18030")
    )
    inp = SgmlPair("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    (first,) = [c for p in registry.plan(inp, 1000) for c in registry.load(p)]
    assert first.encodings == ("utf-8", "gb18030")
    assert first.tgt.decode("gb18030").split("\n") == zh


@pytest.mark.parametrize(
    ("ref_docs", "ref_lines", "message"),
    [
        (DOCS[:2], 2, r"s\.en\.sgm has 3 segments but .*r\.zh\.sgm has 2"),
        (["d1", "d2", "d2"], 3, r"s\.en\.sgm and .*r\.zh\.sgm differ at segment 2: "
         r"document d1 segment 2 in one, document d2 segment 1 in the other"),
    ],
)  # fmt: skip
def test_pairs_whose_segments_differ_are_refused_naming_both(
    tmp_path: Path, ref_docs, ref_lines, message
):
    (tmp_path / "s.en.sgm").write_bytes(sgml_set(["a", "b", "c"], DOCS, "en", ref=False))
    (tmp_path / "r.zh.sgm").write_bytes(sgml_set(["x"] * ref_lines, ref_docs, "zh", ref=True))
    inp = SgmlPair("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    with pytest.raises(CorpusAlignmentError, match=message):
        records(inp, 10)


def test_files_without_segments_are_refused(tmp_path: Path):
    (tmp_path / "s.en.sgm").write_bytes(b"just text\n")
    (tmp_path / "r.zh.sgm").write_bytes(sgml_set(["x"], ["d"], "zh", ref=True))
    inp = SgmlPair("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    with pytest.raises(CorpusAlignmentError, match=r"s\.en\.sgm has 0 segments but .* has 1"):
        list(registry.plan(inp, 10))
    (tmp_path / "r.zh.sgm").write_bytes(b"also text\n")
    with pytest.raises(InputError, match=r"s\.en\.sgm: no <seg> elements"):
        list(registry.plan(inp, 10))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'<p>\n<seg id="1">a\n<seg id="2">b</seg>',
         "line 2: <seg id=1> has no </seg> before the <seg id=2> on line 3"),
        (b'<seg id="1">a\n</p>', "line 1: <seg id=1> has no </seg> before the </p> on line 2"),
        (b'<seg id="1">a <p> b</seg>', "line 1: <seg id=1> has no </seg> before the <p> on line 1"),
        (b'<seg id="1">a <doc docid="x"',
         "line 1: <seg id=1> has no </seg> before the <doc on line 1"),
        (b'\n<seg id="1">a\n', "line 2: <seg id=1> has no </seg> (the file ends first)"),
        (b'<seg id="1">a</seg>\n\n</seg>', "line 3: </seg> has no <seg> before it"),
        (b'<doc docid="x"\n<seg id="1">a</seg>', "line 1: <doc has no '>'"),
    ],
)  # fmt: skip
def test_a_segment_without_its_close_is_refused_naming_file_line_and_reason(data, message):
    for size in (1, 4, len(data)):  # cut anywhere
        blocks = [data[i : i + size] for i in range(0, len(data), size)]
        with pytest.raises(InputError) as refused:
            segments(blocks)
        assert str(refused.value) == f"x.sgm: {message}"


def _without_close(data: bytes, seg: int | None = None) -> bytes:
    """`data` without the `</seg>` of its segment `id="seg"` (None: of every segment)."""
    if seg is None:
        return data.replace(b"</seg>", b"")
    close = data.index(b"</seg>", data.index(b'<seg id="%d">' % seg))
    return data[:close] + data[close + len(b"</seg>") :]


class _Counting:
    """A compiled pattern that counts the bytes it is given to scan."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern, self.scanned = pattern, 0

    def finditer(
        self, data: bytes, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[bytes]]:
        self.scanned += min(endpos, len(data)) - pos
        return self.pattern.finditer(data, pos, endpos)

    def split(self, data: bytes) -> list[bytes]:
        self.scanned += len(data)
        return self.pattern.split(data)

    def match(self, data: bytes, pos: int) -> re.Match[bytes] | None:
        return self.pattern.match(data, pos)


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[_Counting, _Counting]:
    """The split on plain segments (`_SEG`) and the scan by tags (`_ITEM`), counting."""
    found = _Counting(sgml._SEG), _Counting(sgml._ITEM)
    monkeypatch.setattr(sgml, "_SEG", found[0])
    monkeypatch.setattr(sgml, "_ITEM", found[1])
    return found


def test_five_thousand_unclosed_segments_are_refused_at_the_first(monkeypatch):
    """The issue's 228 KB: 169 CPU-seconds, quadratic, then no error."""
    lines = [f"Sentence number {i} of a test set without its closing tags." for i in range(5000)]
    data = _without_close(sgml_set(lines, ["d"] * 5000, "en", ref=False))
    assert len(data) > 228_000 and data.count(b"<seg") == 5000
    split, by_tags = _counting(monkeypatch)
    blocks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    with pytest.raises(InputError) as refused:
        segments(blocks, "s.en.sgm")
    assert str(refused.value) == (
        "s.en.sgm: line 4: <seg id=1> has no </seg> before the <seg id=2> on line 5"
    )
    assert split.scanned == by_tags.scanned == 65536  # the first block only


def test_a_pair_missing_the_same_close_is_refused_not_merged(tmp_path: Path):
    """Both sides' segment 2 lost its `</seg>`: the ids agree, but the pair would have
    kept `b <seg id="3">c` as one segment."""
    en = sgml_set(["a", "b", "c", "d"], ["d"] * 4, "en", ref=False)
    zh = sgml_set(["w", "x", "y", "z"], ["d"] * 4, "zh", ref=True)
    (tmp_path / "s.en.sgm").write_bytes(_without_close(en, 2))
    (tmp_path / "r.zh.sgm").write_bytes(_without_close(zh, 2))
    inp = SgmlPair("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    message = r"s\.en\.sgm: line 5: <seg id=2> has no </seg> before the <seg id=3> on line 6$"
    with pytest.raises(InputError, match=message):
        records(inp)


@pytest.mark.parametrize("tag", [b'<seg id="1">', b"<seg id=1>"])  # split, or read by tags
@pytest.mark.parametrize(
    ("head", "refused"),
    [
        # segments of 600 KB, each carried over a block's end at most once: 28 read
        (b"", None),
        # a segment that never ends: refused once it holds more than MAX_SEGMENT bytes
        (b"<seg>", "line 1: <seg id=1> holds more than 1,048,576 bytes"),
        (b'<doc docid="d" ', "line 1: <doc has no '>'"),  # a tag that never ends
    ],
)
def test_reading_is_linear_whatever_the_markup(monkeypatch, tag, head, refused):
    """16 MiB read in 1 MiB blocks: each byte scanned at most twice by each pattern (once
    more where a segment spans a block's end), where a quadratic reading went over the
    file again with each block."""
    words = b"word " * ((16 << 20) // 5)  # 16 MiB
    segment = tag + words[:600_000] + b"</seg>\n"
    data = head.replace(b"<seg>", tag) + words if head else b"<doc docid='d'><p>\n" + segment * 28
    counted = _counting(monkeypatch)
    blocks = (data[i : i + (1 << 20)] for i in range(0, len(data), 1 << 20))
    if refused is None:
        assert len(segments(blocks)) == 28
    else:
        with pytest.raises(InputError, match=rf"^x\.sgm: {refused}"):
            segments(blocks)
    assert all(pattern.scanned <= 2 * len(data) for pattern in counted)


def test_a_segment_too_long_is_refused_whole_or_cut():
    """A whole segment of MAX_SEGMENT bytes is read; of one more, refused."""
    for size in (sgml.MAX_SEGMENT, sgml.MAX_SEGMENT + 1):
        data = b'<p>\n<seg id="1">a</seg>\n<seg id="2">' + b"x" * size + b"</seg>\n</p>\n"
        for block in (1 << 16, 1 << 20, len(data)):
            blocks = [data[i : i + block] for i in range(0, len(data), block)]
            if size == sgml.MAX_SEGMENT:
                assert [len(text) for _, _, text in segments(blocks)] == [1, size]
                continue
            with pytest.raises(InputError, match=r"^x\.sgm: line 3: <seg id=2> holds more"):
                segments(blocks)


# Pieces of a set: its structure, segments in WMT's form or other ones (the texts below
# inside), and each thing that breaks a set or that its form does not allow.
STRUCTURE = ['<srcset setid="x">', '<doc docid="d1" sysid="s">', "<doc docid='d2'>",
             "<DOC docid=d3>", "<doc>", "<p>", "</p>", "</doc>", "<hl>", "</hl>", "<!-- c -->",
             "stray text", "<b>", "</seg>", '<doc docid="x"', "<p"]  # fmt: skip
OPENS = ['<seg id="{}">', "<seg id={}>", '<SEG ID="{}">', '<seg id="{}" >', "<seg>",
         "<seg\nid='{}'>", '<seg  id="{}">', '<seg xid="{}">']  # fmt: skip
IDS = ["1", "2", "10", "a b", "", "x'y", "<", "1\n"]
CLOSES = ["</seg>", "</seg>", "</SEG>", "</seg >", "", "</seg", "</se"]
TEXTS = ["Tea", " ", "中文", "&amp;", "&#10;", "&bogus;", "&", "'", '"', ">", "\t", "\n",
         " \n\t ", "\r", "<b>x</b>", "a < b", "<p>", "<", "</seg", "<seg", "<segment>",
         "</SEG >", "</p"]  # fmt: skip
GAPS = ["", "\n", " ", "\n\n"]


@st.composite
def sgml_sets(draw) -> tuple[bytes, int]:
    """A set's bytes, mostly segments in WMT's form, and a size to cut it in blocks of."""
    parts = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts.append(draw(st.sampled_from(STRUCTURE)))
        elif kind == 1:  # WMT's form (of other texts too, above)
            text = "".join(draw(st.lists(st.sampled_from(["Tea", " ", "&amp;", "中文"]))))
            parts.append(f'<seg id="{draw(st.sampled_from(IDS[:3]))}">{text}</seg>')
        else:
            open_ = draw(st.sampled_from(OPENS)).format(draw(st.sampled_from(IDS)))
            text = "".join(draw(st.lists(st.sampled_from(TEXTS), max_size=4)))
            parts.append(open_ + text + draw(st.sampled_from(CLOSES)))
        parts.append(draw(st.sampled_from(GAPS)))
    data = "".join(parts).encode()
    return data, draw(st.integers(1, max(1, len(data))))


def _read_until_refused(data: bytes, size: int) -> tuple[list, str | None]:
    """The segments read from `data` in blocks of `size` bytes, and the message that
    refused it (None: read to its end)."""
    got: list[tuple[bytes, bytes, bytes]] = []
    try:
        for batch in sgml._batches([data[i : i + size] for i in range(0, len(data), size)], "x"):
            got += zip(*batch, strict=True)
    except InputError as refused:
        return got, str(refused)
    return got, None


@settings(max_examples=400, deadline=None)
@given(sgml_sets())
def test_what_is_read_by_splits_is_what_is_read_tag_by_tag(found: tuple[bytes, int]):
    """The same segments, the same refusal after them, as the tags alone read (`_SEG`
    never matching: the whole file read by `_scan`, as every file was before)."""
    split = _read_until_refused(*found)
    with mock.patch.object(sgml, "_SEG", re.compile(rb"(?!)()()")):
        assert split == _read_until_refused(*found)


def test_a_set_in_wmts_form_is_read_by_splits(monkeypatch):
    """Only what lies between the segments (a `<doc>`, a `<p>`) is read tag by tag."""
    en = shared_lines("ntrex128-enzh", "en")[:200]
    docs = [f"d{i // 20}" for i in range(200)]
    data = sgml_set(en, docs, "en", ref=False)
    split, by_tags = _counting(monkeypatch)
    blocks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    texts = [unescape(text, "utf-8").decode() for _, _, text in segments(blocks)]
    assert texts == [line.strip() for line in en]
    assert split.scanned < 1.1 * len(data) and by_tags.scanned < 0.1 * len(data)


def test_ids_are_compared_in_order_whatever_repeats_them(tmp_path: Path):
    """A pair that differs first at segment 5, in its second chunk, where an earlier
    segment has the ids the other file's segment 5 has."""
    docs = ["d1", "d1", "d1", "d2", "d1"]
    (tmp_path / "s.en.sgm").write_bytes(sgml_set(list("abcde"), docs, "en", ref=False))
    (tmp_path / "r.zh.sgm").write_bytes(sgml_set(list("vwxyz"), [*docs[:4], "d2"], "zh", True))
    inp = SgmlPair("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    message = "differ at segment 5: document d1 segment 1 in one, document d2 segment 2 in"
    with pytest.raises(CorpusAlignmentError, match=message):
        records(inp, chunk_lines=3)


# Pieces: a pair of plain SGML files measured in spans and read in pieces of segments by
# many workers, against the same pair read as one stream.


@contextlib.contextmanager
def _cut_on(grid: tuple[int, int], url: str, wanted: str) -> Iterator[tuple[Iterator[bytes], str]]:
    """A file's stream (`sgml._opened`) in blocks that end where `grid` says."""
    data = Path(url).read_bytes()
    encoding = found_encoding(url, wanted, data, True)
    head, size = grid
    bom = encodings.decoding_codec(encoding) == "utf-8"
    first = data[:head].removeprefix(UTF8_BOM) if bom else data[:head]
    yield iter([first, *(data[i : i + size] for i in range(head, len(data), size))]), encoding


def _in_order(chunks: Iterable[RawChunk]) -> tuple[list[RawChunk], str | None]:
    """The chunks read until refused, and the refusal (its class and message)."""
    got: list[RawChunk] = []
    try:
        got.extend(chunks)
    except (InputError, CorpusAlignmentError) as refused:
        return got, f"{type(refused).__name__}: {refused}"
    return got, None


def _pieces(inp: CorpusInput, chunk_lines: int, span_bytes: int, every: int) -> Iterator[RawChunk]:
    """The chunks of every piece, loaded in order, of `inp` measured in spans of
    `span_bytes` with a mark every `every` segments."""
    reader = registry.reader("sgml")
    measured = [(span, sgml.measure(inp, span, every)) for span in survey(inp, span_bytes)]
    for piece in reader.plan(inp, chunk_lines, measured):
        yield from reader.load(piece)


def _pair(tmp_path: Path, src: bytes, tgt: bytes) -> CorpusInput:
    (tmp_path / "s.en.sgm").write_bytes(src)
    (tmp_path / "r.zh.sgm").write_bytes(tgt)
    return SgmlPair("train", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))


@st.composite
def wmt_pairs(draw) -> tuple[bytes, bytes]:
    """A pair of sets in WMT's form, of texts with entities and markup's characters."""
    count = draw(st.integers(0, 40))
    parts = ["Tea", " ", "中文", "&", "<", ">", '"', "\n", "seg"]
    texts = st.lists(st.sampled_from(parts), max_size=6).map("".join)
    docs = sorted(draw(st.lists(st.integers(0, 4), min_size=count, max_size=count)))
    ids = [f"d{doc}" for doc in docs]
    src = sgml_set(draw(st.lists(texts, min_size=count, max_size=count)), ids, "en", ref=False)
    tgt = sgml_set(draw(st.lists(texts, min_size=count, max_size=count)), ids, "zh", ref=True)
    return src, tgt


_BREAKS = {"</seg>", '<doc docid="x"', "<p", "<", "", "</seg", "</se", "<seg", "</SEG >", "</p"}


@st.composite
def sound_sets(draw) -> bytes:
    """A set that is read to its end, of segments in every form `sgml_sets` draws and
    the structure's tags, comments and inline markup between and inside them."""
    parts = []
    for _ in range(draw(st.integers(0, 30))):
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from([s for s in STRUCTURE if s not in _BREAKS])))
        else:
            open_ = draw(st.sampled_from(OPENS)).format(draw(st.sampled_from(IDS[:6])))
            texts = st.sampled_from([t for t in TEXTS if t not in _BREAKS])
            close = draw(st.sampled_from([c for c in CLOSES if c not in _BREAKS]))
            parts.append(open_ + "".join(draw(st.lists(texts, max_size=4))) + close)
        parts.append(draw(st.sampled_from(GAPS)))
    return "".join(parts).encode()


@st.composite
def hostile_pairs(draw) -> tuple[bytes, bytes]:
    """A set of any markup, broken (`sgml_sets`) or not, against itself, its texts
    changed, or another."""
    sets = st.one_of(sgml_sets().map(lambda found: found[0]), sound_sets())
    src = draw(sets)
    return src, draw(st.sampled_from([src, src.replace(b"Tea", b"T"), draw(sets)]))


def _same_as_the_stream(
    tmp_path: Path, pair: tuple[bytes, bytes], cuts: tuple[int, int, int, int, int]
) -> None:
    chunk_lines, span_bytes, every, head, size = cuts
    inp = _pair(tmp_path, *pair)
    with (
        mock.patch.object(sgml, "_GRID", (head, size)),
        mock.patch.object(sgml, "_opened", functools.partial(_cut_on, (head, size))),
    ):
        streamed = _in_order(sgml._pair_chunks(inp, chunk_lines))
        assert _in_order(_pieces(inp, chunk_lines, span_bytes, every)) == streamed


CUTS = st.tuples(
    st.integers(1, 12),  # segments a chunk
    st.integers(97, 400),  # bytes a span
    st.integers(1, 5),  # segments between marks
    st.integers(16, 200),  # the stream's head
    st.integers(16, 200),  # and each of its blocks
)


@settings(max_examples=300, deadline=None)
@given(wmt_pairs(), CUTS)
def test_pieces_of_a_wmt_pair_are_its_stream(tmp_path_factory, pair, cuts):
    """The same chunks, numbered the same, in pieces cut anywhere (a span's end inside a
    tag, a mark's segment before a piece's first, a block's end inside a segment)."""
    _same_as_the_stream(tmp_path_factory.mktemp("pair"), pair, cuts)


@settings(max_examples=400, deadline=None)
@given(hostile_pairs(), CUTS)
def test_pieces_of_any_markup_are_its_stream_until_refused_as_it_is(tmp_path_factory, pair, cuts):
    """Markup of any form, broken or not: the same chunks, then the same refusal (the
    file, line and tag; the ids or counts that differ), loaded in order."""
    _same_as_the_stream(tmp_path_factory.mktemp("pair"), pair, cuts)


def test_a_plain_pair_is_split_and_others_are_streamed(tmp_path: Path):
    en = sgml_set([f"s{i}" for i in range(50)], ["d"] * 50, "en", ref=False)
    inp = _pair(tmp_path, en, en)
    reader = registry.reader("sgml")
    assert reader.whole(inp) is None
    pieces = [planned.part for planned in registry.plan(inp, 20)]
    assert [type(p).__name__ for p in pieces] == ["SgmlPiece"] * 3
    assert [(p.first, p.last) for p in pieces] == [(1, False), (21, False), (41, True)]
    (tmp_path / "r.zh.sgm.gz").write_bytes(gzip.compress(en))
    packed = SgmlPair("train", inp.src, str(tmp_path / "r.zh.sgm.gz"))
    assert reader.whole(packed) == "one gzip stream" and reader.survey(packed) == []
    (tmp_path / "r.zh").write_text("x\n" * 50)
    mixed = SgmlPair("train", inp.src, str(tmp_path / "r.zh"))
    assert reader.whole(mixed) == "SGML beside a text file" and reader.survey(mixed) == []
    utf16 = _pair(tmp_path, en, en.decode().encode("utf-16"))
    assert all(type(p.part) is RawChunk for p in registry.plan(utf16, 20))
    # segments more than MAX_SEGMENT apart: a piece's reading could carry more than the stream's
    apart = en.replace(b"</seg>\n", b"</seg>" + b" " * sgml.MAX_SEGMENT + b"\n", 1)
    assert all(type(p.part) is RawChunk for p in registry.plan(_pair(tmp_path, apart, apart), 20))


def test_a_piece_reads_its_blocks_where_the_stream_does(tmp_path: Path):
    """A last segment of MAX_SEGMENT + 10 bytes is refused where it starts in the last 10
    bytes before one of the stream's block ends (more than MAX_SEGMENT of it is carried
    over the next), else read: the last piece, which starts later, cuts its blocks where
    the stream does, so refuses it, or reads it, as the stream does."""
    grid = sgml._boundary(0)
    segment = b'<seg id="1">' + b"x" * (sgml.MAX_SEGMENT - 8) + b"</seg>\n"
    for start, refused in ((grid - 16, False), (grid - 4, True), (grid, False)):
        head = UTF8_BOM + b"<doc docid='a'>\n" + b'<seg id="0">a</seg>\n' * 50_000
        data = head + b"\n" * (start - len(head)) + segment
        inp = _pair(tmp_path, data, data)
        for chunk_lines in (20_000, 50_001):
            expected = _in_order(sgml._pair_chunks(inp, chunk_lines))
            assert (expected[1] is not None) == refused
            assert _in_order(_pieces(inp, chunk_lines, 1 << 20, 1024)) == expected
