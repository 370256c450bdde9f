"""The corpus readers by name: a new format is its module in `readers/` and its
`register` line here, which also gives `--table-format` its choices, `nmtpipe prepare`
the readers' own options (`options_config`), the docs their table of readers and the
plan its size estimate.

`survey`, `measure` and `plan` run on the workers that plan an input (`Reader`), `load`
on the worker that cleans a piece; a piece travels with its reader's name, so a worker
needs nothing else to open it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from nmtpipe.transforms.corpus.base import Reader, SurveyedReader, TableReader
from nmtpipe.transforms.corpus.inputs import CorpusInput, file_name, without_compression
from nmtpipe.transforms.corpus.raw_corpus import RawChunk
from nmtpipe.transforms.corpus.readers.arrow_files import ArrowReader, ParquetReader
from nmtpipe.transforms.corpus.readers.csv_table import CsvReader
from nmtpipe.transforms.corpus.readers.jsonl import JsonLinesReader
from nmtpipe.transforms.corpus.readers.lines import LinesReader
from nmtpipe.transforms.corpus.readers.sgml import SgmlReader
from nmtpipe.transforms.corpus.readers.tmx import TmxReader
from nmtpipe.transforms.corpus.readers.tsv import TsvReader
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import nested, with_configs

READERS: dict[str, Reader] = {}  # in registration order: the docs' and the help's


def register(cls: type[Reader]) -> None:
    """Serve inputs whose `reader` is `cls.NAME` with it. `--table-format`'s choices and
    the readers' options are read when the prepare config's module is imported: register
    before that."""
    if cls.NAME in READERS:
        raise ValueError(f"{cls.__name__}: {cls.NAME} already registered")
    READERS[cls.NAME] = cls()


register(LinesReader)
register(SgmlReader)
register(TsvReader)
register(ParquetReader)
register(JsonLinesReader)
register(ArrowReader)
register(CsvReader)
register(TmxReader)

AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class _Options:
    """The readers' own options, a field each for those that have some."""


def options_config(module: str = __name__, group: str | None = None) -> type:
    """The config class of the options of the readers registered now, as
    `ReaderOptions` in `module`: a field per reader with options, named as the reader."""
    fields = (
        (name, found.Config, nested(found.Config, group=group))
        for name, found in READERS.items()
        if dataclasses.fields(found.Config)
    )
    return with_configs(_Options, fields, name="ReaderOptions", module=module)


def chosen_options(name: str, given: Any) -> Any:
    """Reader `name`'s options from `given` (`options_config`'s), None where they are its
    defaults: an input records them only where they were changed."""
    found = getattr(given, name, None)
    return None if found is None or found == reader(name).Config() else found


def table_formats() -> tuple[str, ...]:
    """`--table-format`'s choices: `auto` and every table reader's name."""
    return (AUTO, *(name for name, reader in READERS.items() if isinstance(reader, TableReader)))


def table_suffixes() -> str:
    """The file names the table readers are told by, for the help and messages."""
    return ", ".join(s for r in READERS.values() if isinstance(r, TableReader) for s in r.SUFFIXES)


def reader(name: str) -> Reader:
    """The reader registered as `name`."""
    try:
        return READERS[name]
    except KeyError:
        raise ValueError(f"no corpus reader {name!r}; the readers: {', '.join(READERS)}") from None


def is_table(name: str) -> bool:
    """Whether the reader `name` reads tables (`--table`)."""
    return isinstance(reader(name), TableReader)


def table_reader(name: str) -> TableReader:
    """The table reader registered as `name` (`--table-format`'s choices)."""
    found = reader(name)
    if not isinstance(found, TableReader):
        raise ValueError(f"{name} is not a table reader; they are: {table_formats()[1:]}")
    return found


def _suffix(url: str) -> str:
    """`.sgm` of `dev/a.SGM.gz`: the suffix a reader is told by."""
    return os.path.splitext(without_compression(file_name(url)).lower())[1]


def table_format(url: str, named: str = AUTO) -> str:
    """The table reader of `url`: `named`, else the one its suffix (before any
    compression suffix) names."""
    if named != AUTO:
        return named
    for found in READERS.values():
        if isinstance(found, TableReader) and _suffix(url) in found.SUFFIXES:
            return found.NAME
    raise ConfigError(
        f"{url}: cannot tell a table's format from its name (known: {table_suffixes()}); "
        "name it with --table-format"
    )


def pair_reader(urls: Iterable[str]) -> str:
    """The reader of a pair of files: one whose suffix a paired reader names (SGML),
    else line-aligned text."""
    suffixes = {_suffix(url) for url in urls}
    for found in READERS.values():
        if found.PAIRED and suffixes & set(found.SUFFIXES):
            return found.NAME
    return LinesReader.NAME


class Piece(NamedTuple):
    """A piece of an input (`Reader.plan`) and the name of the reader that loads it."""

    reader: str
    part: Any


def survey(inp: CorpusInput) -> list[Any]:
    """The parts of `inp` to measure before it is planned (`SurveyedReader.survey`);
    none for a reader that surveys nothing."""
    found = reader(inp.reader)
    return found.survey(inp) if isinstance(found, SurveyedReader) else []


def measure(inp: CorpusInput, part: Any) -> Any:
    """What one surveyed part of `inp` holds that its plan needs
    (`SurveyedReader.measure`)."""
    found = reader(inp.reader)
    assert isinstance(found, SurveyedReader), f"{found.NAME} surveys nothing to measure"
    return found.measure(inp, part)


def plan(
    inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]] | None = None
) -> Iterator[Piece]:
    """The pieces of `inp`, each about `chunk_lines` records, from its parts `measured`
    (surveyed and measured here where None: one process's whole plan)."""
    if measured is None:
        measured = [(part, measure(inp, part)) for part in survey(inp)]
    for part in reader(inp.reader).plan(inp, chunk_lines, measured):
        yield Piece(inp.reader, part)


def load(piece: Piece) -> Iterator[RawChunk]:
    """The raw chunks a piece holds or points at."""
    return reader(piece.reader).load(piece.part)
