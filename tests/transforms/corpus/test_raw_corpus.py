"""Reading corpus files: compression, archives, line ends, alignment, chunking."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from pathlib import Path

import pytest

from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import (
    MAX_RECORD_BYTES,
    SHOWN_BYTES,
    Overlong,
    read_chunks,
    split_lines,
)
from nmtpipe.transforms.errors import InputError

COMPRESSORS = {"": lambda b: b, ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


def lines_of(inp: CorpusInput, chunk_lines: int = 2) -> list[tuple[int, bytes, bytes | None]]:
    """(line number, src, tgt) for every line, through chunks."""
    out = []
    for chunk in read_chunks(inp, chunk_lines):
        src = chunk.src.split(b"\n")
        tgt = chunk.tgt.split(b"\n") if chunk.tgt is not None else [None] * len(src)
        out += [(chunk.first_line + i, s, t) for i, (s, t) in enumerate(zip(src, tgt, strict=True))]
    return out


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_reads_plain_and_compressed_pairs_in_lockstep(tmp_path: Path, suffix: str):
    for lang, text in (("en", b"one\ntwo\nthree\n"), ("zh", b"\xe4\xb8\x80\n\xe4\xba\x8c\n3\n")):
        (tmp_path / f"c.{lang}{suffix}").write_bytes(COMPRESSORS[suffix](text))
    inp = CorpusInput("train", str(tmp_path / f"c.en{suffix}"), str(tmp_path / f"c.zh{suffix}"))
    assert lines_of(inp) == [
        (1, b"one", "一".encode()),
        (2, b"two", "二".encode()),
        (3, b"three", b"3"),
    ]


def test_missing_final_newline_is_not_misalignment(tmp_path: Path):
    (tmp_path / "c.en").write_bytes(b"a\nb\n")
    (tmp_path / "c.zh").write_bytes(b"x\ny")
    assert len(lines_of(CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh")))) == 2


def test_bom_is_stripped_and_crlf_and_unicode_separators_kept_for_later(tmp_path: Path):
    (tmp_path / "c.en").write_bytes(b"\xef\xbb\xbfa\r\nb\xe2\x80\xa8c\r\n")
    (tmp_path / "c.zh").write_bytes(b"x\ny\n")
    got = lines_of(CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh")))
    # Only "\n" ends a line: U+2028 stays inside line 2, CR is the cleaner's job.
    assert [s for _, s, _ in got] == [b"a\r", b"b\xe2\x80\xa8c\r"]


def test_members_of_a_tgz_archive(tmp_path: Path):
    archive = tmp_path / "training.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (
            ("nc/news.zh-en.en", b"Hello\nWorld\n"),
            ("nc/news.zh-en.zh", b"A\nB\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    inp = CorpusInput(
        "train", f"tar://nc/news.zh-en.en::{archive}", f"tar://nc/news.zh-en.zh::{archive}"
    )
    assert lines_of(inp) == [(1, b"Hello", b"A"), (2, b"World", b"B")]
    missing = CorpusInput(
        "train", f"tar://nc/nope.en::{archive}", f"tar://nc/news.zh-en.zh::{archive}"
    )
    with pytest.raises(InputError, match=r"has no member nc/nope\.en \(did you mean nc/news"):
        list(read_chunks(missing, 10))
    # Both sides are offered where both are as near: the one meant may be either.
    misspelled = CorpusInput(
        "train", f"tar://nc/news.zh-en.es::{archive}", f"tar://nc/news.zh-en.zh::{archive}"
    )
    with pytest.raises(
        InputError, match=r"\(did you mean nc/news\.zh-en\.en or nc/news\.zh-en\.zh\?"
    ):
        list(read_chunks(misspelled, 10))


def test_a_tar_member_that_is_a_link_names_what_it_links_to(tmp_path: Path):
    archive = tmp_path / "t.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("d/x.en", b"Hello\n"), ("d/x.zh", b"A\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("d/link.en")
        link.type, link.linkname = tarfile.SYMTYPE, "x.en"
        tar.addfile(link)
    inp = CorpusInput("train", f"tar://d/link.en::{archive}", f"tar://d/x.zh::{archive}")
    with pytest.raises(InputError, match=r"t\.tgz: d/link\.en is a link to d/x\.en, not a file: "
                       r"name d/x\.en$"):  # fmt: skip
        list(read_chunks(inp, 10))


def test_tsv_chunks_carry_whole_lines(tmp_path: Path):
    (tmp_path / "p.tsv").write_bytes(b"a\tb\tattribution\nc\td\n")
    inp = CorpusInput("train", str(tmp_path / "p.tsv"))
    assert lines_of(inp) == [(1, b"a\tb\tattribution", None), (2, b"c\td", None)]


def test_corrupt_compressed_file_is_an_input_error(tmp_path: Path):
    (tmp_path / "c.en.gz").write_bytes(gzip.compress(b"a\nb\n")[:-8] + b"garbage!")
    (tmp_path / "c.zh").write_bytes(b"x\ny\n")
    inp = CorpusInput("train", str(tmp_path / "c.en.gz"), str(tmp_path / "c.zh"))
    with pytest.raises(InputError, match=r"cannot read .*c\.en\.gz"):
        list(read_chunks(inp, 10))


def test_zip_members_and_compressed_tar_members(tmp_path: Path):
    import zipfile

    with zipfile.ZipFile(tmp_path / "en-zh.txt.zip", "w") as z:
        z.writestr("OPUS.en-zh.en", "Hello\nWorld\n")
        z.writestr("OPUS.en-zh.zh", "你好\n世界\n")
    archive = tmp_path / "en-zh.txt.zip"
    inp = CorpusInput("train", f"zip://OPUS.en-zh.en::{archive}", f"zip://OPUS.en-zh.zh::{archive}")
    assert lines_of(inp) == [(1, b"Hello", "你好".encode()), (2, b"World", "世界".encode())]
    with tarfile.open(tmp_path / "t.tgz", "w:gz") as tar:
        for name, data in (("a.en.gz", gzip.compress(b"x\ny\n")), ("a.zh", b"1\n2\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    packed = CorpusInput(
        "train", f"tar://a.en.gz::{tmp_path}/t.tgz", f"tar://a.zh::{tmp_path}/t.tgz"
    )
    assert lines_of(packed) == [(1, b"x", b"1"), (2, b"y", b"2")]


def test_a_stream_without_a_newline_is_one_overlong_line_read_past_not_held():
    blocks = (b"\0" * (1 << 20) for _ in range(200))  # 200 MB, never held
    (line,) = split_lines(blocks)
    assert isinstance(line, Overlong) and line.size == 200 << 20 and len(line) == SHOWN_BYTES


def test_lines_around_an_overlong_one_are_read_as_they_are():
    long = b"x" * (MAX_RECORD_BYTES + 1)
    blocks = [b"a\nbb\n" + long[:100], long[100:] + b"\nccc", b"\n" + b"d" * MAX_RECORD_BYTES]
    lines = list(split_lines(blocks))
    assert lines == [b"a", b"bb", long[:SHOWN_BYTES], b"ccc", b"d" * MAX_RECORD_BYTES]
    assert [type(line) for line in lines][2] is Overlong and lines[2].size == len(long)
