"""The lines reader: plain files surveyed in spans whose line ends workers count, cut
into pieces of lines that the cleaning workers read, equal to the same files streamed;
other streams read where they are planned."""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import MAX_RECORD_BYTES, SHOWN_BYTES, read_chunks
from nmtpipe.transforms.corpus.readers.lines import (
    ChunkRef,
    load_chunks,
    measure,
    plan_chunks,
    survey,
)
from nmtpipe.transforms.errors import CorpusAlignmentError

COMPRESSORS = {"": lambda b: b, ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


def planned(inp: CorpusInput, chunk_lines: int, span_bytes: int = 1 << 25, every: int = 1024):
    """The pieces of `inp`, its spans surveyed and measured here."""
    spans = survey(inp, span_bytes)
    return list(plan_chunks(inp, chunk_lines, [(s, measure(inp, s, every)) for s in spans]))


@pytest.mark.parametrize("chunk_lines", [1, 2, 1000])
def test_different_line_counts_name_both_files_and_counts(tmp_path: Path, chunk_lines: int):
    (tmp_path / "c.en").write_bytes(b"a\nb\nc\n")
    (tmp_path / "c.zh").write_bytes(b"x\ny\n")
    inp = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))
    expected = f"{tmp_path}/c.en has 3 lines but {tmp_path}/c.zh has 2"
    with pytest.raises(CorpusAlignmentError, match=expected):
        list(read_chunks(inp, chunk_lines))
    with pytest.raises(CorpusAlignmentError, match=expected):
        list(planned(inp, chunk_lines))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pairs=st.lists(
        st.tuples(*[st.binary(max_size=9).map(lambda b: b.replace(b"\n", b""))] * 2), max_size=40
    ),
    final_newline=st.tuples(st.booleans(), st.booleans()),
    chunk_lines=st.integers(1, 7),
    span_bytes=st.integers(1, 40),
    every=st.integers(1, 5),
)
def test_pieces_of_measured_spans_equal_the_files_streamed(
    tmp_path: Path, pairs, final_newline, chunk_lines, span_bytes, every
):
    """Spans as small as a byte and marks as dense as every line: wherever the spans cut
    the lines of two files of different lengths, the pieces hold what streaming reads."""
    for (lang, side), newline in zip((("en", 0), ("zh", 1)), final_newline, strict=True):
        lines = [pair[side] for pair in pairs]
        newline = newline or lines[-1:] == [b""]  # else its last line is no line at all
        data = b"\n".join(lines) + (b"\n" if newline and lines else b"")
        (tmp_path / f"h.{lang}").write_bytes(data)
    # Named UTF-8: random bytes may look like UTF-16 to the detector, which reads it whole.
    utf8 = ("utf-8", "utf-8")
    inp = CorpusInput("train", str(tmp_path / "h.en"), str(tmp_path / "h.zh"), encodings=utf8)
    streamed = list(read_chunks(inp, chunk_lines))
    pieces = planned(inp, chunk_lines, span_bytes, every)
    assert all(isinstance(p, ChunkRef) and p.src[2] < every > p.tgt[2] for p in pieces)
    assert [c for piece in pieces for c in load_chunks(piece)] == streamed


def test_a_file_is_measured_by_spans_and_never_read_whole_by_one(tmp_path: Path):
    """Each span's measure reads its own bytes; the planner sums their counts."""
    data = b"".join(b"line %d\n" % i for i in range(10_000))
    (tmp_path / "c.en").write_bytes(data)
    (tmp_path / "c.zh").write_bytes(data.upper())
    inp = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))
    spans = survey(inp, span_bytes=10_000)
    assert len(spans) == 2 * -(-len(data) // 10_000)  # both sides, cut by size alone
    measured = [(s, measure(inp, s, every=100)) for s in spans]
    assert sum(m.newlines for s, m in measured if s.side == 0) == 10_000
    assert all(len(m.marks) <= 1 + 10_000 // 100 for _, m in measured)
    pieces = list(plan_chunks(inp, 3000, measured))
    assert [p.first_line for p in pieces] == [1, 3001, 6001, 9001]
    assert [p.count for p in pieces] == [3000, 3000, 3000, 1000]
    assert all(p.src[2] < 100 > p.tgt[2] for p in pieces)  # lines skipped to reach it
    (last,) = load_chunks(pieces[-1])
    assert last.src.split(b"\n")[0] == b"line 9000" and last.tgt.endswith(b"LINE 9999")


def test_compressed_and_remote_inputs_are_streamed_not_ranged(tmp_path: Path):
    (tmp_path / "c.en.gz").write_bytes(gzip.compress(b"a\n"))
    (tmp_path / "c.zh.gz").write_bytes(gzip.compress(b"b\n"))
    inp = CorpusInput("train", str(tmp_path / "c.en.gz"), str(tmp_path / "c.zh.gz"))
    (chunk,) = planned(inp, 10)
    assert chunk.src == b"a"  # the lines themselves, not a byte range


def test_a_gb18030_side_with_crlf_is_planned_as_byte_ranges_with_its_encoding(tmp_path: Path):
    zh = ["你好。", "再见。"] * 200
    (tmp_path / "c.en").write_bytes(b"hi\r\nbye\r\n" * 200)
    (tmp_path / "c.zh").write_bytes(("\r\n".join(zh) + "\r\n").encode("gb18030"))
    inp = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))
    refs = list(planned(inp, 150))
    assert all(ref.encodings == ("utf-8", "gb18030") for ref in refs)
    (chunk,) = load_chunks(refs[0])
    assert chunk.tgt.decode("gb18030").split("\r\n")[:2] == zh[:2]
    assert [c.tgt for c in read_chunks(inp, 150)] == [c.tgt for r in refs for c in load_chunks(r)]


def test_utf16_is_transcoded_as_it_streams(tmp_path: Path):
    (tmp_path / "c.en").write_bytes("one\r\ntwo\r\n".encode("utf-16"))
    (tmp_path / "c.zh").write_bytes("一\n二\n".encode("utf-16-be"))  # no mark: told by NULs
    inp = CorpusInput("train", str(tmp_path / "c.en"), str(tmp_path / "c.zh"))
    (chunk,) = planned(inp, 10)  # not byte ranges: lines are not split on b"\n" there
    assert (chunk.src, chunk.tgt) == (b"one\r\ntwo\r", "一\n二".encode())
    assert chunk.encodings == ("utf-16", "utf-16-be")


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_pair_with_an_overlong_line_is_a_too_long_reject_in_both_readers(tmp_path, suffix):
    """Ranged (plain) and streamed (.gz) chunks: the pair is unread, the rest as read."""
    long = b"w" * (3 * MAX_RECORD_BYTES)
    src = b"one\n" + long + b"\nthree\n"
    tgt = "一\n二\n三\n".encode()
    for lang, data in (("en", src), ("zh", tgt)):
        (tmp_path / f"c.{lang}{suffix}").write_bytes(COMPRESSORS[suffix](data))
    inp = CorpusInput("train", str(tmp_path / f"c.en{suffix}"), str(tmp_path / f"c.zh{suffix}"))
    (piece,) = planned(inp, 10)
    (chunk,) = [piece] if suffix else load_chunks(piece)
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
    (piece,) = planned(inp, 5000)
    loaded = [piece] if suffix else list(load_chunks(piece, chunk_bytes=100_000))
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
    (ref,) = planned(inp, 1000)
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
        refs = list(planned(inp, 100))
        assert all(isinstance(ref, ChunkRef) for ref in refs) and len(refs) == 3
        return [(c.first_line, c.src, c.tgt) for ref in refs for c in load_chunks(ref)]

    assert loaded(stored) == loaded(local)
