"""Every input's chunks, whatever holds it: `plan` on the worker that lists an input,
`load` on the worker that cleans a chunk.

Plain local text files and Parquet files are planned as references (byte ranges, row
groups) that the cleaning workers read themselves; a TMX is cut into fragments of whole
units that the cleaning workers parse; the rest (compressed files, archive members,
remote text, SGML, Arrow files) are read where they are planned, in one pass, into
chunks of raw records.
"""

from __future__ import annotations

from collections.abc import Iterator

from nmtpipe.transforms.formats.corpus import arrow_files, jsonl, sgml, tmx
from nmtpipe.transforms.formats.corpus.arrow_files import TableRef
from nmtpipe.transforms.formats.corpus.jsonl import JsonLinesRef
from nmtpipe.transforms.formats.corpus.tmx import TmxFragment
from nmtpipe.transforms.storage import raw_corpus
from nmtpipe.transforms.storage.inputs import ARROW, JSONL, LINES, PARQUET, TMX, CorpusInput
from nmtpipe.transforms.storage.raw_corpus import ChunkRef, RawChunk

Planned = RawChunk | ChunkRef | JsonLinesRef | TableRef | TmxFragment


def plan(inp: CorpusInput, chunk_lines: int) -> Iterator[Planned]:
    """The chunks of `inp`, `chunk_lines` records each (a table's row groups may make
    its references larger; they are loaded `chunk_lines` at a time all the same)."""
    if inp.layout == LINES:
        if inp.tgt is not None and any(sgml.is_sgml(url) for url in inp.urls()):
            yield from sgml.chunks(inp, chunk_lines)
        else:
            yield from raw_corpus.plan_chunks(inp, chunk_lines)
    elif inp.layout in (PARQUET, ARROW):
        yield from arrow_files.plan(inp, chunk_lines)
    elif inp.layout == JSONL:
        yield from jsonl.plan(inp, chunk_lines)
    elif inp.layout == TMX:
        yield from tmx.plan(inp, chunk_lines)
    else:
        raise ValueError(f"no reader for {inp.layout}")


def load(planned: Planned) -> Iterator[RawChunk]:
    """The raw chunks a planned element holds or points at."""
    if isinstance(planned, RawChunk):
        yield planned
    elif isinstance(planned, ChunkRef):
        yield from raw_corpus.load_chunks(planned)
    elif isinstance(planned, JsonLinesRef):
        yield from jsonl.load(planned)
    elif isinstance(planned, TmxFragment):
        yield tmx.load(planned)
    else:
        yield from arrow_files.load(planned)
