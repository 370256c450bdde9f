"""A new corpus format is one reader class and one `register` line: a toy format of
`SOURCE ||| TARGET` lines, planned as references its workers load, is resolved by its
suffix and prepared end to end."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.base import SurveyedReader, TableReader
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import RawChunk
from nmtpipe.transforms.corpus.tables import resolve_tables
from nmtpipe.transforms.errors import ConfigError
from tests.helpers import IN_MEMORY, shared_lines

EN = shared_lines("tatoeba-cmn", "en")[7000:7400]
ZH = shared_lines("tatoeba-cmn", "zh")[7000:7400]


class ToyRange(NamedTuple):
    inp: CorpusInput
    first: int  # the first record, from 1
    count: int


class ToyReader(SurveyedReader, TableReader):
    """`SOURCE ||| TARGET` a line, as fast_align takes its input."""

    NAME = "toy"
    SUFFIXES = (".toy",)
    SPLIT = "ranges of lines, read by the workers that clean them"

    def fields(self, inp: CorpusInput) -> dict:
        return {"source": "string", "target": "string"}

    def survey(self, inp: CorpusInput) -> list[str]:
        return ["lines"]  # one part, measured by some worker: how many lines the file has

    def measure(self, inp: CorpusInput, part: str) -> int:
        with open(inp.src, encoding="utf-8") as f:
            return sum(1 for _ in f)

    def plan(self, inp: CorpusInput, chunk_lines: int, measured: Sequence) -> Iterator[ToyRange]:
        ((_, total),) = measured
        for first in range(1, total + 1, chunk_lines):
            yield ToyRange(inp, first, min(chunk_lines, total - first + 1))

    def load(self, piece: ToyRange) -> Iterator[RawChunk]:
        with open(piece.inp.src, encoding="utf-8") as f:
            lines = itertools.islice(f, piece.first - 1, piece.first - 1 + piece.count)
            pairs = [line.rstrip("\n").split(" ||| ", 1) for line in lines]
        src, tgt = ("\n".join(side).encode() for side in zip(*pairs, strict=True))
        inp = piece.inp
        yield RawChunk(inp.origin, inp.role, piece.first, src, tgt, inp.columns)


@pytest.fixture
def toy() -> Iterator[None]:
    registry.register(ToyReader)
    yield
    del registry.READERS[ToyReader.NAME]


def test_a_registered_reader_is_found_by_its_suffix_and_prepared(toy, tmp_path: Path):
    lines = (f"{e} ||| {z}\n" for e, z in zip(EN, ZH, strict=True))
    (tmp_path / "c.toy").write_text("".join(lines), encoding="utf-8")
    assert "toy" in registry.table_formats() and ".toy" in registry.table_suffixes()
    (inp,) = resolve_tables(
        str(tmp_path / "c.toy"), "train", ("en", "zh"), fields=("source", "target")
    )
    assert (inp.reader, inp.fields) == ("toy", ("source", "target"))
    pieces = list(registry.plan(inp, 150))
    assert [p.part.first for p in pieces] == [1, 151, 301]  # references: nothing read yet
    (chunk,) = registry.load(pieces[1])
    assert chunk.src.decode().split("\n")[0] == EN[150] and chunk.first_line == 151
    config = PrepareConfig(
        "en", "zh", str(tmp_path / "out"), table=(str(tmp_path / "c.toy"),),
        table_columns=("source", "target"), valid_fraction=0, test_fraction=0,
    )  # fmt: skip
    outcome = run_prepare(config, IN_MEMORY)
    (info,) = outcome.stats["inputs"].values()
    assert info["read"] == 400 and info["kept"] > 380
    kept = pq.read_table(tmp_path / "out" / outcome.manifest["splits"]["train"]["files"][0])
    assert set(kept.column("src").to_pylist()) <= set(EN)


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="ToyReader: toy already registered"):
        registry.register(ToyReader)
    with pytest.raises(ValueError, match="no corpus reader 'nope'; the readers: lines, sgml"):
        registry.reader("nope")
    with pytest.raises(
        ConfigError, match=r"x\.xlsx: cannot tell a table's format .*\.csv, \.tmx, \.toy"
    ):
        registry.table_format("x.xlsx")
