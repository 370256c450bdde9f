"""CSV files of pairs (`datasets`' `to_csv`, spreadsheets' exports): a header row naming
the columns, then one record a row, as RFC 4180 writes them: fields in double quotes
may hold commas, quotes (doubled) and line breaks.

A record's number is its row's, the header not counted, so that a reject names the row a
spreadsheet shows less one. A quoted field may span lines, so a file cannot be cut at
line ends without reading what precedes the cut: one worker streams it, holding a chunk
of rows at a time. A line break inside a field becomes a space, as a table's does
(`records.py`). A row with fewer fields than the header is rejected `bad-record`; a
field longer than MAX_RECORD_BYTES
(most often a quote never closed, which runs to the end of the file) stops the reading
with the row it starts on. Bytes that are not UTF-8 are passed on as they are, for the
cleaner to reject the pair `invalid-utf8` as it does a line's. The delimiter is an option
(`--csv-delimiter`): spreadsheets write `;` where the decimal mark is a comma.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from nmtpipe.transforms.corpus.base import TableReader
from nmtpipe.transforms.corpus.fields import Tree
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import (
    BAD_RECORD,
    MAX_RECORD_BYTES,
    RawChunk,
    Unread,
    open_binary,
)
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.options import option
from nmtpipe.transforms.storage.encodings import UTF8

_NOT_UTF8 = "surrogateescape"  # bytes that are not UTF-8, kept to be told apart
_NAMED = {"tab": "\t", "\\t": "\t", "semicolon": ";", "comma": ",", "pipe": "|"}


def delimiter(text: str) -> str:
    """One character between fields (`tab`, `\\t`, `semicolon`, `comma` and `pipe` by
    name); a quote, a line break or a letter would make the rows unreadable."""
    found = _NAMED.get(text.lower(), text)
    if len(found) != 1 or found in '"\r\n' or found.isalnum():
        raise ValueError(f"a CSV delimiter is one character (or 'tab') other than a quote, "
                         f"a line break, a letter or a digit, not {text!r}")  # fmt: skip
    return found


@dataclass(frozen=True)
class CsvConfig:
    """The CSV reader's options."""

    csv_delimiter: str = option(
        ",",
        parse=delimiter,
        metavar="C",
        help="the character between a CSV file's fields: ',' as RFC 4180 and datasets' "
        "to_csv write, ';' as spreadsheets do where the decimal mark is a comma, or tab",
    )


def _rows(f: io.BufferedIOBase, url: str, separator: str) -> Iterator[tuple[int, list[str]]]:
    """(line the row starts on, its fields) of each row, the header first."""
    text = io.TextIOWrapper(f, encoding="utf-8-sig", errors=_NOT_UTF8, newline="")
    rows = csv.reader(text, delimiter=separator, strict=False)
    limit = csv.field_size_limit(MAX_RECORD_BYTES)
    try:
        start = 1
        while True:
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as e:
                raise InputError(
                    f"{url}: the row starting on line {start}: {e} (a quote never closed?)"
                ) from None
            yield start, row
            start = rows.line_num + 1
    finally:
        csv.field_size_limit(limit)


def _header(inp: CorpusInput, separator: str) -> list[str]:
    with open_binary(inp.src) as f:
        for _, header in _rows(f, inp.src, separator):
            return header
    raise InputError(f"{inp.src}: empty (a CSV file starts with its header row)")


def _pair(
    row: list[str], columns: tuple[int, int], width: int, separator: str
) -> tuple[str, str, Unread | None]:
    """A row's two texts, or empty ones and why it gives none (its index set later)."""
    if len(row) < width:
        detail = f"{len(row)} fields, the header has {width}"
        line = separator.join(row).encode(UTF8, _NOT_UTF8)
        return "", "", Unread(0, BAD_RECORD, detail, line, None)
    src, tgt = (_one_line(row[c]) for c in columns)
    return src, tgt, None


def _one_line(text: str) -> str:
    """A field's line breaks as spaces (a pair is one line on each side)."""
    if "\n" in text or "\r" in text:
        return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return text


def _chunks(inp: CorpusInput, chunk_rows: int, separator: str) -> Iterator[RawChunk]:
    assert inp.fields is not None
    with open_binary(inp.src) as f:
        rows = _rows(f, inp.src, separator)
        _, header = next(rows)
        columns = (header.index(inp.fields[0]), header.index(inp.fields[1]))
        first = 1
        while batch := list(itertools.islice(rows, chunk_rows)):
            src, tgt, unread = [], [], []
            for i, (_, row) in enumerate(batch):
                s, t, why = _pair(row, columns, len(header), separator)
                src.append(s)
                tgt.append(t)
                if why is not None:
                    unread.append(why._replace(index=i))
            blobs = ("\n".join(side).encode(UTF8, _NOT_UTF8) for side in (src, tgt))
            yield RawChunk(
                inp.origin, inp.role, first, *blobs, inp.columns, (UTF8, UTF8), tuple(unread)
            )
            first += len(batch)


class CsvReader(TableReader):
    """CSV files with a header row; the pair's columns are chosen by their names."""

    NAME = "csv"
    SUFFIXES = (".csv",)
    SPLIT = "streamed by one worker (a quoted field may hold line breaks)"
    Config = CsvConfig

    def whole(self, inp: CorpusInput) -> str:
        return "a quoted CSV field may hold line breaks"

    def fields(self, inp: CorpusInput) -> Tree:
        return dict.fromkeys(_header(inp, self.options(inp).csv_delimiter), "string")

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[RawChunk]:
        return _chunks(inp, chunk_lines, self.options(inp).csv_delimiter)
