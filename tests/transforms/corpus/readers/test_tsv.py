"""TSV lines split into the pair's columns where they are loaded: the columns chosen, in
any order; lines with too few columns, lines that do not decode and lines too long to
read each rejected once, with the reason that is theirs."""

from __future__ import annotations

from pathlib import Path

from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.raw_corpus import RawChunk, Unread
from nmtpipe.transforms.corpus.readers.tsv import split_columns
from nmtpipe.transforms.corpus.resolve import resolve_tsv


def lines(blob: bytes, columns: tuple[int, int] = (0, 1), encoding: str = "utf-8") -> RawChunk:
    return RawChunk("c.tsv", "train", 11, blob, None, columns, (encoding, "utf-8"))


def test_the_pair_s_columns_in_any_order():
    pairs = split_columns(lines("x\t你\tyou\ny\t好\tgood".encode(), columns=(2, 1)))
    assert (pairs.src, pairs.tgt, pairs.decoded) == (b"you\ngood", "你\n好".encode(), True)


def test_too_few_columns_and_lines_that_do_not_decode_are_unread_with_why():
    blob = "hi\t你好\tCC-BY\njust one column\nx\ty\n".encode("gb18030") + b"\x81\tz\n\xff"
    pairs = split_columns(lines(blob, encoding="gb18030"))
    assert pairs.src.split(b"\n") == [b"hi", b"", b"x", b"", b""]
    assert pairs.tgt.split(b"\n")[0] == "你好".encode()  # decoded: UTF-8 from here on
    assert pairs.encodings == ("gb18030", "gb18030")  # both sides the file's
    assert [(u.index, u.reason, u.detail, u.src, u.tgt) for u in pairs.unread] == [
        (1, "bad-columns", "1 tab-separated columns, need at least 2", b"just one column", None),
        (3, "undecodable", "line: not gb18030: illegal multibyte sequence at byte 0", b"\x81",
         b"z"),
        (4, "undecodable", "line: not gb18030: incomplete multibyte sequence at byte 0",
         b"\xff", None),
    ]  # fmt: skip


def test_a_line_too_long_to_read_stays_too_long(tmp_path: Path):
    long = "x" * 70_000
    (tmp_path / "t.tsv").write_text(f"a\tb\n{long}\tc\nd\te\n", encoding="utf-8")
    (inp,) = resolve_tsv(str(tmp_path / "t.tsv"), (0, 1), "train", "auto")
    (chunk,) = [c for piece in registry.plan(inp, 10) for c in registry.load(piece)]
    assert chunk.src.split(b"\n") == [b"a", b"", b"d"]
    (unread,) = chunk.unread
    assert isinstance(unread, Unread) and (unread.index, unread.reason) == (1, "too-long")
