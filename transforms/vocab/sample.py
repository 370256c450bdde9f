"""Deterministic samples of the prepared training split, drawn in Beam.

Two ways to choose lines, both functions of the data only:

- `IdSample`: the pairs whose id (a uniform 63-bit hash of the pair) is below a
  threshold — about `fraction` of the pairs, the same ones on every run; what
  SentencePiece trains on (like spm_train's `input_sentence_size`, but deterministic).
- `BudgetSample`: Tensor2Tensor's `generate_lines_for_vocab`, which reads a file, skips
  `countermax = int(file_bytes / file_byte_budget / 2)` lines, takes one, and again,
  until the lines taken add up to the budget. Here the "file" of a side is its train
  text in canonical order (shard by shard, rows by id, one line each), so the result is
  what T2T would sample from that file; the budget cut-off is applied when the sample
  is read back (`read_budget_sample`).

Each shard's chosen lines go to one text file per side; reading the files in shard
order gives the sample. `transforms/beam/sample.py` runs the per-shard work in Beam.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.text.split import ID_RANGE


class TrainShard(NamedTuple):
    """A train shard of a prepared dataset, the global index of its first row, and its
    size in bytes."""

    index: int
    url: str
    first_row: int
    size: int = 0


def read_shard(url: str, columns: Sequence[str]) -> pa.Table:
    return fsio.read_parquet(url, list(columns))


def side_bytes(texts: pa.ChunkedArray) -> int:
    """Bytes of the texts written one per line (T2T compares its budget to file size)."""
    return int(pc.sum(pc.binary_length(texts)).as_py() or 0) + len(texts)


def countermax(file_bytes: int, file_byte_budget: float) -> int:
    return int(file_bytes / file_byte_budget / 2)


@dataclass(frozen=True)
class IdSample:
    """Pairs with an id below `fraction` of the id range."""

    fraction: float

    def mask(self, table: pa.Table, shard: TrainShard, side: str, sizes: dict) -> np.ndarray:
        return table["id"].to_numpy() < int(self.fraction * ID_RANGE)


@dataclass(frozen=True)
class BudgetSample:
    """T2T's every-(countermax+1)-th line, counted over the side's whole train text."""

    file_byte_budget: float

    def mask(self, table: pa.Table, shard: TrainShard, side: str, sizes: dict) -> np.ndarray:
        skip = countermax(sizes[side], self.file_byte_budget)
        index = shard.first_row + np.arange(table.num_rows)
        return (index >= skip) & ((index - skip) % (skip + 1) == 0)


def sample_path(side: str, shard: int) -> str:
    return f"sample/{side}-{shard:05d}.txt"


def shard_bytes(shard: TrainShard, columns: Sequence[str]) -> list[tuple[str, int]]:
    """(column, bytes of its lines) for each column of one train shard."""
    table = read_shard(shard.url, columns)
    return [(column, side_bytes(table[column])) for column in columns]


def sample_shard(
    selector: IdSample | BudgetSample,
    shard: TrainShard,
    columns: Sequence[str],
    folder: str,
    sizes: dict[str, int],
) -> list[tuple[str, int]]:
    """Write the chosen lines of each column of one train shard to `folder`; how many."""
    table = read_shard(shard.url, ("id", *columns))
    written = []
    for column in columns:
        chosen = table[column].filter(pa.array(selector.mask(table, shard, column, sizes)))
        lines = chosen.to_pylist()
        body = "".join(line + "\n" for line in lines).encode()
        fsio.write_bytes(fsio.join(folder, sample_path(column, shard.index)), body)
        written.append((column, len(lines)))
    return written


def sample_lines(folder: str, column: str, shards: int) -> Iterator[str]:
    """The sample of one column, shard by shard, streamed."""
    for k in range(shards):
        text = fsio.read_bytes(fsio.join(folder, sample_path(column, k))).decode()
        yield from text.split("\n")[:-1]


def read_budget_sample(lines: Iterator[str], file_byte_budget: float) -> list[str]:
    """T2T's cut-off: keep taking lines while the budget (in characters) is positive."""
    taken: list[str] = []
    budget = file_byte_budget
    for line in lines:
        if budget <= 0:
            break
        budget -= len(line)
        taken.append(line)
    return taken


def train_shards(root: str, manifest_doc: dict) -> list[TrainShard]:
    """The train shards of the prepared dataset at `root`, with their row offsets."""
    entries = {f["path"]: f for f in manifest_doc["files"]}
    paths = manifest_doc["splits"]["train"]["files"]
    offsets = itertools.accumulate((entries[p]["rows"] for p in paths), initial=0)
    return [
        TrainShard(k, manifest.file_url(root, entries[p]), first, entries[p]["size"])
        for k, (p, first) in enumerate(zip(paths, offsets, strict=False))
    ]
