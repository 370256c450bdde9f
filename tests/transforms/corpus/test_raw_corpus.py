"""Reading corpus files: compression, archives, line ends, alignment, chunking."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import (
    MAX_RECORD_BYTES,
    SHOWN_BYTES,
    Overlong,
    read_chunks,
    split_lines,
)
from nmtpipe.transforms.corpus.readers.lines import ChunkRef, load_chunks, plan_chunks
from nmtpipe.transforms.errors import CorpusAlignmentError, InputError

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


@pytest.mark.parametrize("chunk_lines", [1, 2, 1000])
def test_different_line_counts_name_both_files_and_counts(tmp_path: Path, chunk_lines: int):
    (tmp_path / "c.en").write_bytes(b"a\nb\nc\n")
    (tmp_path / "c.zh").write_bytes(b"x\ny\n")
    inp = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))
    expected = f"{tmp_path}/c.en has 3 lines but {tmp_path}/c.zh has 2"
    with pytest.raises(CorpusAlignmentError, match=expected):
        list(read_chunks(inp, chunk_lines))
    with pytest.raises(CorpusAlignmentError, match=expected):
        list(plan_chunks(inp, chunk_lines))


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


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    final_newline=st.booleans(),
    chunk_lines=st.integers(1, 5),
)
def test_byte_range_chunks_equal_streamed_chunks(tmp_path: Path, lines, final_newline, chunk_lines):
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    (tmp_path / "h.en").write_bytes(data)
    (tmp_path / "h.zh").write_bytes(data)
    # Named UTF-8: random bytes may look like UTF-16 to the detector, which reads it whole.
    utf8 = ("utf-8", "utf-8")
    inp = CorpusInput("train", str(tmp_path / "h.en"), str(tmp_path / "h.zh"), encodings=utf8)
    streamed = list(read_chunks(inp, chunk_lines))
    ranged = [c for ref in plan_chunks(inp, chunk_lines) for c in load_chunks(ref)]
    assert ranged == streamed


def test_compressed_and_remote_inputs_are_streamed_not_ranged(tmp_path: Path):
    (tmp_path / "c.en.gz").write_bytes(gzip.compress(b"a\n"))
    (tmp_path / "c.zh.gz").write_bytes(gzip.compress(b"b\n"))
    inp = CorpusInput("train", str(tmp_path / "c.en.gz"), str(tmp_path / "c.zh.gz"))
    (chunk,) = plan_chunks(inp, 10)
    assert chunk.src == b"a"  # the lines themselves, not a byte range


def test_a_gb18030_side_with_crlf_is_planned_as_byte_ranges_with_its_encoding(tmp_path: Path):
    zh = ["你好。", "再见。"] * 200
    (tmp_path / "c.en").write_bytes(b"hi\r\nbye\r\n" * 200)
    (tmp_path / "c.zh").write_bytes(("\r\n".join(zh) + "\r\n").encode("gb18030"))
    inp = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))
    refs = list(plan_chunks(inp, 150))
    assert all(ref.encodings == ("utf-8", "gb18030") for ref in refs)
    (chunk,) = load_chunks(refs[0])
    assert chunk.tgt.decode("gb18030").split("\r\n")[:2] == zh[:2]
    assert [c.tgt for c in read_chunks(inp, 150)] == [c.tgt for r in refs for c in load_chunks(r)]


def test_utf16_is_transcoded_as_it_streams(tmp_path: Path):
    (tmp_path / "c.en").write_bytes("one\r\ntwo\r\n".encode("utf-16"))
    (tmp_path / "c.zh").write_bytes("一\n二\n".encode("utf-16-be"))  # no mark: told by NULs
    inp = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))
    (chunk,) = plan_chunks(inp, 10)  # not byte ranges: lines are not split on b"\n" there
    assert (chunk.src, chunk.tgt) == (b"one\r\ntwo\r", "一\n二".encode())
    assert chunk.encodings == ("utf-16", "utf-16-be")


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


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_pair_with_an_overlong_line_is_a_too_long_reject_in_both_readers(tmp_path, suffix):
    """Ranged (plain) and streamed (.gz) chunks: the pair is unread, the rest as read."""
    long = b"w" * (3 * MAX_RECORD_BYTES)
    src = b"one\n" + long + b"\nthree\n"
    tgt = "一\n二\n三\n".encode()
    for lang, data in (("en", src), ("zh", tgt)):
        (tmp_path / f"c.{lang}{suffix}").write_bytes(COMPRESSORS[suffix](data))
    inp = CorpusInput("train", str(tmp_path / f"c.en{suffix}"), str(tmp_path / f"c.zh{suffix}"))
    (planned,) = plan_chunks(inp, 10)
    (chunk,) = [planned] if suffix else load_chunks(planned)
    assert chunk.src == b"one\n\nthree" and chunk.tgt == "一\n\n三".encode()
    (unread,) = chunk.unread
    assert (unread.index, unread.reason, unread.tgt) == (1, "too-long", "二".encode())
    assert unread.src == long[:SHOWN_BYTES]
    assert unread.detail == f"src has a line of {len(long):,} bytes (limit 65,536): not read"


def _records(chunks) -> list[tuple[int, bytes, bytes]]:
    """(line number, src, tgt) of every line of `chunks`."""
    return [
        (c.first_line + i, s, t)
        for c in chunks
        for i, (s, t) in enumerate(zip(c.src.split(b"\n"), c.tgt.split(b"\n"), strict=True))
    ]


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_many_long_lines_make_more_chunks_not_a_larger_one(tmp_path: Path, suffix: str):
    """A side's bytes end a chunk before `chunk_lines` do, both sides at the same line,
    byte ranges (plain) and streams (.gz) alike; the lines are those of one big chunk."""
    src = b"".join(b"%d " % i + b"e" * (i % 700) + b"\n" for i in range(2000))
    tgt = b"".join(b"%d " % i + b"z" * 10 + b"\n" for i in range(2000))
    for lang, data in (("en", src), ("zh", tgt)):
        (tmp_path / f"c.{lang}{suffix}").write_bytes(COMPRESSORS[suffix](data))
    inp = CorpusInput("train", str(tmp_path / f"c.en{suffix}"), str(tmp_path / f"c.zh{suffix}"))
    whole = list(read_chunks(inp, 5000))
    cut = list(read_chunks(inp, 5000, chunk_bytes=100_000))
    (planned,) = plan_chunks(inp, 5000)
    loaded = [planned] if suffix else list(load_chunks(planned, chunk_bytes=100_000))
    assert len(whole) == 1 and len(cut) == 5 and _records(cut) == _records(whole)
    assert suffix or (len(loaded) == 5 and _records(loaded) == _records(whole))
    bounded = cut if suffix else cut + loaded
    assert max(len(c.src) for c in bounded) < 100_000 + 256 * 700


def test_a_range_streamed_in_chunks_keeps_its_mark_dropped_and_its_overlong_lines_unread(
    tmp_path: Path,
):
    long = b"w" * (MAX_RECORD_BYTES + 1)
    (tmp_path / "c.en").write_bytes(b"\xef\xbb\xbfone\n" + b"two\n" * 600 + long + b"\nend\n")
    (tmp_path / "c.zh").write_bytes(b"x\n" * 602 + b"y\n")
    inp = CorpusInput(
        "train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"), encodings=("utf-8",) * 2
    )
    (ref,) = plan_chunks(inp, 1000)
    chunks = list(load_chunks(ref, chunk_bytes=1000))
    assert [c.first_line for c in chunks] == [1, 513]  # 256 lines at a time
    records = _records(chunks)
    assert records[0] == (1, b"one", b"x") and records[-1] == (603, b"end", b"y")
    (unread,) = chunks[-1].unread
    assert (chunks[-1].first_line + unread.index, unread.reason) == (602, "too-long")


@pytest.mark.parametrize("store", ["memory", "s3"])
def test_plain_files_in_an_object_store_are_read_by_range_as_local_ones_are(
    tmp_path: Path, store: str, request
):
    """Planned as byte ranges (no text through the shuffle), loaded as local files are."""
    import fsspec

    root = "memory://ranged" if store == "memory" else request.getfixturevalue("s3")
    fs, _ = fsspec.core.url_to_fs(root)
    sides = {"en": b"".join(b"line %d\n" % i for i in range(300)), "zh": "行\n".encode() * 300}
    for lang, data in sides.items():
        fs.pipe(f"{root}/c.{lang}", data)
        (tmp_path / f"c.{lang}").write_bytes(data)
    stored = CorpusInput("train", f"{root}/c.en", f"{root}/c.zh")
    local = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))

    def loaded(inp: CorpusInput) -> list[tuple[int, bytes, bytes | None]]:
        refs = list(plan_chunks(inp, 100))
        assert all(isinstance(ref, ChunkRef) for ref in refs) and len(refs) == 3
        return [(c.first_line, c.src, c.tgt) for ref in refs for c in load_chunks(ref)]

    assert loaded(stored) == loaded(local)
