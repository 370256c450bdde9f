"""What a corpus reader is: one class that knows its name, the file names it reads, how
an input it reads is completed on the driver, how the input is cut into pieces there,
and how a worker loads one piece into chunks of raw records.

`nmtpipe prepare` resolves every input to a reader by name (`registry.py`): the
prefixes and pairs of line-aligned files to `lines` (or `sgml` by a file's suffix),
`--tsv` to `tsv`, `--table` to the reader its suffix or `--table-format` names. The
shape is Beam's `FileBasedSource` (a source says how it splits and reads a range) and
HF datasets' packaged modules (one module a format); a new format is a module in
`readers/` and a `register` line in `registry.py`.

Planning has up to three stages, each on whatever worker the runner picks: a
`SurveyedReader`'s `survey` lists parts of an input (byte spans of a plain file) and its
`measure` finds what planning needs in each (its line ends), in parallel; then `plan`
cuts the input into pieces from what was measured (or from what it reads itself). A
piece is anything picklable `plan` yields: a reference its `load` opens on the worker
that cleans it (lines of a plain file, row groups, a TMX fragment), or a chunk already
read where the input cannot be split (one gzip stream, a tar member), which `load`
passes on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from nmtpipe.transforms.corpus.fields import Tree
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import RawChunk


@dataclass(frozen=True)
class NoOptions:
    """The options of a reader that has none."""


class Reader(ABC):
    """A corpus format. Readers hold no state: one instance serves every input; an
    input carries the reader's options (`options`)."""

    NAME: ClassVar[str]  # what `CorpusInput.reader` and `--table-format` say
    SUFFIXES: ClassVar[tuple[str, ...]] = ()  # file names it reads (before compression)
    PAIRED: ClassVar[bool] = False  # reads a pair of files, one side each (`pair_reader`)
    COMPRESSIBLE: ClassVar[bool] = True  # False: read in parts, so never compressed
    INFLATION: ClassVar[int] = 1  # text bytes a stored byte holds (its own compression)
    # How it is spread over workers, for the docs' table of readers and the plan's log.
    SPLIT: ClassVar[str]
    # Its options: a frozen dataclass of `options.option` fields, each named for the
    # reader (`csv_delimiter`), which `nmtpipe prepare` and its YAML take (`registry.py`).
    Config: ClassVar[type] = NoOptions

    def options(self, inp: CorpusInput) -> Any:
        """The reader's options for `inp`: those it was resolved with, else the defaults."""
        return self.Config() if inp.options is None else inp.options

    def whole(self, inp: CorpusInput) -> str | None:
        """Why one worker reads all of `inp` (a stream that cannot be split), for the
        plan's line; None where many share its pieces."""
        return None

    @abstractmethod
    def plan(
        self, inp: CorpusInput, chunk_lines: int, measured: Sequence[tuple[Any, Any]]
    ) -> Iterator[Any]:
        """The pieces of `inp`, about `chunk_lines` records each, on the worker that
        plans it, from its surveyed parts and what was measured in each (in no order)."""

    def load(self, piece: Any) -> Iterator[RawChunk]:
        """The raw chunks of one piece, on the worker that cleans them (by default the
        piece is a chunk read where it was planned)."""
        yield piece


class SurveyedReader(Reader):
    """A format whose inputs are measured in parts by the workers before they are
    planned (a plain file's spans, whose line ends they count); a reader of no other kind
    plans from what it reads itself (a footer, a header) or reads the input where it is
    planned."""

    @abstractmethod
    def survey(self, inp: CorpusInput) -> list[Any]:
        """Parts of `inp` that workers `measure` in parallel before it is planned; none
        where this input is read where it is planned (a compressed file)."""

    @abstractmethod
    def measure(self, inp: CorpusInput, part: Any) -> Any:
        """What a worker finds in one surveyed part, for `plan` (small: it crosses a
        shuffle)."""


class TableReader(Reader):
    """A format given with `--table`: records whose two fields are chosen on the driver,
    their encoding the format's (where other readers read lines of text in an encoding
    found or named)."""

    @abstractmethod
    def fields(self, inp: CorpusInput) -> Tree | None:
        """The shape of a table's records (its fields' types), read on the driver, that
        the pair's two fields are chosen from; None where they are the pair's
        languages (a TMX's `xml:lang`)."""
