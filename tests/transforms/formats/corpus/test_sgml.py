"""WMT's SGML sets: segments in order, entities unescaped, pairs checked."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from nmtpipe.transforms.errors import CorpusAlignmentError, InputError
from nmtpipe.transforms.formats.corpus import chunks, sgml
from nmtpipe.transforms.formats.corpus.sgml import is_sgml, segment_texts, unescape
from nmtpipe.transforms.storage.inputs import CorpusInput
from tests.helpers import sgml_set, shared_lines, write_tgz

DOCS = ["d1", "d1", "d2"]


def records(inp: CorpusInput, chunk_lines: int = 2) -> list[tuple[int, bytes, bytes]]:
    out = []
    for planned in chunks.plan(inp, chunk_lines):
        for chunk in chunks.load(planned):
            pairs = zip(chunk.src.split(b"\n"), chunk.tgt.split(b"\n"), strict=True)
            out += [(chunk.first_line + i, s, t) for i, (s, t) in enumerate(pairs)]
    return out


def test_segments_in_order_unescaped_as_wmt_writes_them(tmp_path: Path):
    en = ['He said "no" & left.', "a < b", "Plain."]
    zh = ["他说“不”就走了。", "a 小于 b", "平常。"]
    (tmp_path / "dev-src.en.sgm").write_bytes(sgml_set(en, DOCS, "en", ref=False))
    (tmp_path / "dev-ref.zh.sgm").write_bytes(sgml_set(zh, DOCS, "zh", ref=True))
    assert b"&quot;no&quot; &amp; left" in (tmp_path / "dev-src.en.sgm").read_bytes()
    inp = CorpusInput("valid", str(tmp_path / "dev-src.en.sgm"), str(tmp_path / "dev-ref.zh.sgm"))
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
    got = list(segment_texts(blocks, "utf-8"))
    ids = [(doc, seg) for doc, seg, _ in sgml._segments(blocks)]
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
    inp = CorpusInput(
        "valid", f"tar://dev/a-src.en.sgm.gz::{archive}", f"tar://dev/a-ref.zh.sgm::{archive}"
    )
    assert [s.decode() for _, s, _ in records(inp)] == en
    (tmp_path / "ref.zh").write_text("\n".join(zh) + "\n", encoding="utf-8")
    mixed = CorpusInput("valid", f"tar://dev/a-src.en.sgm.gz::{archive}", str(tmp_path / "ref.zh"))
    assert [t.decode() for _, _, t in records(mixed)] == zh


def test_a_gb18030_sgml_file_is_found_and_kept_in_its_encoding(tmp_path: Path):
    zh = shared_lines("tatoeba-cmn", "zh")[2000:2300]
    en = shared_lines("tatoeba-cmn", "en")[2000:2300]
    docs = ["d"] * len(zh)
    (tmp_path / "s.en.sgm").write_bytes(sgml_set(en, docs, "en", ref=False))
    (tmp_path / "r.zh.sgm").write_bytes(
        sgml_set(zh, docs, "zh", ref=True).decode().encode("gb18030")
    )
    inp = CorpusInput("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    (first,) = [c for p in chunks.plan(inp, 1000) for c in chunks.load(p)]
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
    inp = CorpusInput("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    with pytest.raises(CorpusAlignmentError, match=message):
        list(chunks.plan(inp, 10))


def test_files_without_segments_are_refused(tmp_path: Path):
    (tmp_path / "s.en.sgm").write_bytes(b"just text\n")
    (tmp_path / "r.zh.sgm").write_bytes(sgml_set(["x"], ["d"], "zh", ref=True))
    inp = CorpusInput("valid", str(tmp_path / "s.en.sgm"), str(tmp_path / "r.zh.sgm"))
    with pytest.raises(CorpusAlignmentError, match=r"s\.en\.sgm has 0 segments but .* has 1"):
        list(chunks.plan(inp, 10))
    (tmp_path / "r.zh.sgm").write_bytes(b"also text\n")
    with pytest.raises(InputError, match=r"s\.en\.sgm: no <seg> elements"):
        list(chunks.plan(inp, 10))
