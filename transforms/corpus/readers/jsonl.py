"""JSON Lines files of pairs (`datasets`' `to_json`): one object a line, its two fields
the sides.

They are read as lines (`raw_corpus.py`: byte ranges of a plain file on disk or in an
object store, else streamed), so a record's number is its line's. A chunk's lines are
parsed by Arrow's JSON reader with a schema of just the two fields, and only a chunk it
refuses (a line that is not an object, a field that is not a string, a blank line) is
parsed line by line, each line it cannot take a pair from becoming a `bad-record` reject.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.json as pa_json

from nmtpipe.transforms.corpus.base import TableReader
from nmtpipe.transforms.corpus.fields import Tree
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import (
    BAD_RECORD,
    INVALID_UTF8,
    RawChunk,
    Unread,
    open_lines,
)
from nmtpipe.transforms.corpus.readers.lines import ChunkRef, LinesReader, load_chunks, plan_chunks
from nmtpipe.transforms.corpus.records import table_chunk, tree_of_value
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.storage.encodings import UTF8


class JsonLinesRef(NamedTuple):
    """Byte ranges of a JSON Lines file (`ref`), parsed where they are loaded."""

    ref: ChunkRef
    inp: CorpusInput


def first_object(inp: CorpusInput, looked_at: int = 100) -> dict:
    """The shape of the file's first record that is a JSON object (`fields.Tree`), to
    find its fields by; of the first `looked_at` lines, past those it cannot read."""
    with open_lines(inp.src, UTF8) as side:
        for line in itertools.islice(filter(bytes.strip, side.records), looked_at):
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, Mapping):
                return dict(tree_of_value(value))
    return {}


class JsonLinesReader(LinesReader, TableReader):
    """JSON Lines files, surveyed and planned as the lines of a TSV file are and parsed
    where the lines are loaded."""

    NAME = "jsonl"
    PAIRED = False
    SUFFIXES = (".jsonl", ".json", ".ndjson")

    def fields(self, inp: CorpusInput) -> Tree:
        tree = first_object(inp)
        if not tree:
            raise InputError(f"{inp.src}: its first line is not a JSON object")
        return tree

    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[JsonLinesRef | RawChunk]:
        for chunk in plan_chunks(inp, chunk_lines, measured):
            yield JsonLinesRef(chunk, inp) if isinstance(chunk, ChunkRef) else parse(chunk, inp)

    def load(self, piece: Any) -> Iterator[RawChunk]:
        if not isinstance(piece, JsonLinesRef):
            yield piece
            return
        for chunk in load_chunks(piece.ref):
            yield parse(chunk, piece.inp)


def _schema(fields: tuple[str, str]) -> pa.Schema:
    """A schema of just the two fields, nested as their paths say."""
    tree: dict[str, Any] = {}
    for path in fields:
        node = tree
        *parents, leaf = path.split(".")
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = pa.string()

    def arrow(node: dict[str, Any]) -> list[pa.Field]:
        return [
            pa.field(k, pa.struct(arrow(v)) if isinstance(v, dict) else v) for k, v in node.items()
        ]

    return pa.schema(arrow(tree))


def parse(chunk: RawChunk, inp: CorpusInput) -> RawChunk:
    """A chunk of JSON lines as a chunk of pairs."""
    assert inp.fields is not None
    n = chunk.src.count(b"\n") + 1
    options = pa_json.ParseOptions(
        explicit_schema=_schema(inp.fields), unexpected_field_behavior="ignore"
    )
    if chunk.unread:  # lines a reader did not read whole
        return _parse_lines(chunk, inp, inp.fields)
    try:
        table = pa_json.read_json(
            io.BytesIO(chunk.src),
            read_options=pa_json.ReadOptions(block_size=max(len(chunk.src), 1 << 16) + 1),
            parse_options=options,
        )
        if table.num_rows == n:
            return table_chunk(inp, chunk.first_line, table, inp.fields)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    return _parse_lines(chunk, inp, inp.fields)


def value_at(record: Mapping, path: str) -> Any:
    """What a dotted path names in a JSON object (as `fields.resolve` does a schema);
    None where nothing is."""
    if path in record:
        return record[path]
    head, dot, rest = path.partition(".")
    node = record.get(head)
    return value_at(node, rest) if dot and isinstance(node, Mapping) else None


def _parse_lines(chunk: RawChunk, inp: CorpusInput, fields: tuple[str, str]) -> RawChunk:
    sides: tuple[list[str], list[str]] = ([], [])
    unread: list[Unread] = []
    read_past = {u.index: u for u in chunk.unread}
    for i, line in enumerate(chunk.src.split(b"\n")):
        texts, problem = ("", ""), None
        if i in read_past:
            unread.append(read_past[i])
        else:
            texts, problem = _pair_of(line, fields)
        if problem is not None:
            unread.append(Unread(i, *problem, line, None))
        for side, text in zip(sides, texts, strict=True):
            side.append(text.replace("\n", " "))
    src, tgt = ("\n".join(side).encode(UTF8, "surrogatepass") for side in sides)
    return RawChunk(
        chunk.origin, chunk.role, chunk.first_line, src, tgt, chunk.columns, (UTF8, UTF8),
        tuple(unread),
    )  # fmt: skip


def _pair_of(
    line: bytes, fields: tuple[str, str]
) -> tuple[tuple[str, str], tuple[str, str] | None]:
    """The two texts of a JSON line, or empty ones and (reason, detail)."""
    empty = ("", "")
    try:
        record = json.loads(line)
    except UnicodeDecodeError as e:
        return empty, (INVALID_UTF8, f"line: {e.reason} at byte {e.start}")
    except ValueError as e:
        return empty, (BAD_RECORD, f"not JSON: {e}")
    except RecursionError:
        return empty, (BAD_RECORD, "not JSON this reader takes: nested too deep")
    if not isinstance(record, Mapping):
        return empty, (BAD_RECORD, f"a JSON {type(record).__name__}, not an object")
    texts = []
    for path in fields:
        value = value_at(record, path)
        if value is not None and not isinstance(value, str):
            return empty, (BAD_RECORD, f"{path} is a JSON {type(value).__name__}, not a string")
        texts.append(value or "")
    return (texts[0], texts[1]), None
