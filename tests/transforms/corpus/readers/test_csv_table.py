"""CSV files: a header row, quoted fields holding commas, quotes and line breaks, rows
numbered as records, and the rows or files it cannot read."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from nmtpipe.pipelines.workflow.prepare_plan import identity
from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.readers.csv_table import CsvConfig, delimiter
from nmtpipe.transforms.corpus.tables import resolve_tables
from nmtpipe.transforms.errors import InputError
from tests.helpers import shared_lines

EN = shared_lines("tatoeba-cmn", "en")[5000:5300]
ZH = shared_lines("tatoeba-cmn", "zh")[5000:5300]
LANGS = ("en", "zh")


def chunks_of(url: str, chunk_lines: int = 64, **how) -> list:
    (inp,) = resolve_tables(url, "train", LANGS, **how)
    return [c for piece in registry.plan(inp, chunk_lines) for c in registry.load(piece)]


def records_of(url: str, chunk_lines: int = 64, **how) -> list[tuple[int, str, str]]:
    out = []
    for chunk in chunks_of(url, chunk_lines, **how):
        sides = chunk.src.decode().split("\n"), chunk.tgt.decode().split("\n")
        out += [(chunk.first_line + i, *p) for i, p in enumerate(zip(*sides, strict=True))]
    return out


def test_quoted_fields_with_commas_quotes_and_line_breaks(tmp_path: Path):
    en, zh = list(EN), list(ZH)
    en[1] = 'He said, "wait".'
    en[2] = "Two lines,\nand a third\r\none."
    zh[3] = "逗号，和,英文逗号"
    with open(tmp_path / "p.csv", "w", newline="", encoding="utf-8") as f:
        rows = csv.writer(f)  # RFC 4180: CRLF rows, quotes where needed
        rows.writerow(["id", "en", "zh"])
        rows.writerows([i, e, z] for i, (e, z) in enumerate(zip(en, zh, strict=True)))
    got = records_of(str(tmp_path / "p.csv"))
    assert [n for n, _, _ in got] == list(range(1, 301))  # rows, the header not counted
    assert got[1][1] == 'He said, "wait".' and got[3][2] == "逗号，和,英文逗号"
    assert got[2][1] == "Two lines, and a third one."  # a pair is one line each side
    assert [(e, z) for _, e, z in got[4:]] == list(zip(en[4:], zh[4:], strict=True))
    assert len(chunks_of(str(tmp_path / "p.csv"))) == 5  # 64 rows a chunk, one worker


def test_columns_by_name_in_any_order_and_compressed(tmp_path: Path):
    text = "zh,note,en\n" + "".join(
        f"{z},x,{e}\n" for e, z in zip(EN, ZH, strict=True) if "," not in e + z
    )
    (tmp_path / "r.csv.gz").write_bytes(gzip.compress(("\ufeff" + text).encode()))  # with a BOM
    got = records_of(str(tmp_path / "r.csv.gz"))
    assert got[0][1:] == (EN[0], ZH[0]) and len(got) == text.count("\n") - 1
    named = records_of(str(tmp_path / "r.csv.gz"), fields=("note", "en"))
    assert named[0][1:] == ("x", EN[0])


def test_short_rows_are_bad_records_and_bytes_not_utf8_go_on_as_they_are(tmp_path: Path):
    data = b'en,zh\nHi.,\xe5\x97\xa8\nalone\n"x\xff",y\nBye.,"\xe5\x86\x8d\xe8\xa7\x81"\n'
    (tmp_path / "b.csv").write_bytes(data)
    (chunk,) = chunks_of(str(tmp_path / "b.csv"))
    assert chunk.src.split(b"\n") == [b"Hi.", b"", b"x\xff", b"Bye."]  # the cleaner's to judge
    assert chunk.tgt.split(b"\n") == ["嗨".encode(), b"", b"y", "再见".encode()]
    assert [(u.index, u.reason, u.detail, u.src) for u in chunk.unread] == [
        (1, "bad-record", "1 fields, the header has 2", b"alone")
    ]


def test_an_unclosed_quote_or_no_header_stops_naming_the_file_and_line(tmp_path: Path):
    rest = [f"line {i},第 {i} 行" for i in range(6000)]  # 90 kB, no quote to close it
    (tmp_path / "q.csv").write_text("\n".join(["en,zh", "a,b", 'c,"never closed', *rest]))
    with pytest.raises(InputError, match=r"q\.csv: the row starting on line 3: field larger"):
        chunks_of(str(tmp_path / "q.csv"))
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(InputError, match=r"e\.csv: empty \(a CSV file starts with its header"):
        resolve_tables(str(tmp_path / "e.csv"), "train", LANGS)
    (tmp_path / "h.csv").write_text("source,target\na,b\n")
    with pytest.raises(
        InputError, match=r"h\.csv: no fields for en and zh \(it has source, target"
    ):
        resolve_tables(str(tmp_path / "h.csv"), "train", LANGS)


def test_a_delimiter_of_the_user_s_choice_read_and_recorded(tmp_path: Path):
    with open(tmp_path / "s.csv", "w", newline="", encoding="utf-8") as f:
        rows = csv.writer(f, delimiter=";")  # a spreadsheet where the decimal mark is a comma
        rows.writerow(["en", "zh", "score"])
        rows.writerows([e, z, "0,5"] for e, z in zip(EN, ZH, strict=True))
        f.write("alone\n")
    chosen = registry.options_config()(csv=CsvConfig(csv_delimiter=delimiter("semicolon")))
    got = records_of(str(tmp_path / "s.csv"), options=chosen)
    assert got[:300] == [(i + 1, e, z) for i, (e, z) in enumerate(zip(EN, ZH, strict=True))]
    (short,) = [u for c in chunks_of(str(tmp_path / "s.csv"), options=chosen) for u in c.unread]
    assert (short.reason, short.detail) == ("bad-record", "1 fields, the header has 3")
    with pytest.raises(InputError, match=r"s\.csv: no fields for en and zh \(it has en;zh;score"):
        resolve_tables(str(tmp_path / "s.csv"), "train", LANGS)  # read with commas
    (inp,) = resolve_tables(str(tmp_path / "s.csv"), "train", LANGS, options=chosen)
    assert identity(inp)["options"] == {"csv_delimiter": ";"}
    (tmp_path / "c.csv").write_text("en,zh\nHi.,嗨\n")
    defaults = registry.options_config()()
    (plain,) = resolve_tables(str(tmp_path / "c.csv"), "train", LANGS, options=defaults)
    assert plain.options is None and "options" not in identity(plain)  # older fingerprints hold
    assert delimiter("\\t") == delimiter("tab") == "\t"
    for bad in ('"', "ab", "x", "\n", ""):
        with pytest.raises(ValueError, match="a CSV delimiter is one character"):
            delimiter(bad)
