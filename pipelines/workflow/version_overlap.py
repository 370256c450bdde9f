"""What a version leaves out of its parts: duplicates and overlap across inputs.

Each part of a refresh was prepared alone, deduplicated and decontaminated within
itself. A version holds several, and must hold what one `nmtpipe prepare` of all its
inputs would: no pair twice, none in two splits, no train or valid pair sharing a side
with a test pair, no train pair with a valid pair (`transforms/text/overlap.py`). So
before publishing, the driver looks across the parts (taken in input order, so that the
copy from the first input survives, as in a one-shot prepare):

- valid and test splits (small) are read whole: repeats across parts go, and every
  valid and test pair goes into the `Protected` set;
- train splits are streamed a row group at a time against it; their ids, with rows and
  lines, go to sorted scratch files, which are then merged by id range with numpy, so
  that a pair in two parts' training data is found with memory bounded by one range.

The result is a list of exclusions (`transforms/formats/exclusions.py`); parts stay as
they are, so the next version can decide again.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.formats import prepared
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.text.filters import DUPLICATE
from nmtpipe.transforms.text.overlap import Protected, row_reject
from nmtpipe.transforms.text.records import Reject

_COLUMNS = ["id", "src", "tgt", "origin", "line"]
RANGE_ROWS = 2_000_000  # train ids held at once per id range, across all parts


@dataclass(frozen=True)
class VersionPart:
    key: str
    prepared: str  # URL of its prepared output


def _row(part: str, split: str, row: int, reject: Reject) -> dict[str, Any]:
    return {"part": part, "split": split, "row": row, **reject._asdict()}


def _split_tables(part: VersionPart, split: str) -> list[pa.Table]:
    """Every row group of a part's split, in order."""
    root, doc = prepared.read_prepared(part.prepared)
    tables = []
    for rel in doc["splits"].get(split, {}).get("files", []):
        url = fsio.join(root, rel)
        for group in range(len(fsio.parquet_row_groups(url))):
            tables.append(fsio.read_parquet(url, _COLUMNS, [group]))
    return tables


class _Small:
    """The valid and test splits of all parts, their repeats across parts found."""

    def __init__(self, parts: list[VersionPart]) -> None:
        self.protected = Protected()
        self.tables: dict[str, list[pa.Table]] = {}
        self.excluded: list[dict[str, Any]] = []
        for split in ("test", "valid"):
            seen: dict[int, str] = {}
            for part in parts:
                tables = _split_tables(part, split)
                table = pa.concat_tables(tables) if tables else None
                self.tables[f"{part.key}/{split}"] = [] if table is None else [table]
                if table is None:
                    continue
                self.protected.merge(Protected.of_batch(split, table))
                for row, (pair, origin, line) in enumerate(
                    zip(*(table[c].to_pylist() for c in ("id", "origin", "line")), strict=True)
                ):
                    if pair in seen:
                        reject = row_reject(table, row, DUPLICATE, f"same pair as {seen[pair]}")
                        self.excluded.append(_row(part.key, split, row, reject))
                    else:
                        seen[pair] = f"{origin}:{line}"


def version_exclusions(parts: list[VersionPart], keep_overlap: bool) -> list[dict[str, Any]]:
    """The exclusions of a version of `parts` (in input order), as rows for
    `exclusions.write_exclusions`."""
    small = _Small(parts)
    excluded = list(small.excluded)
    for part in parts:
        for table in small.tables[f"{part.key}/valid"]:
            excluded += _against(part, "valid", 0, table, small.protected, keep_overlap)
    with tempfile.TemporaryDirectory(prefix="nmtpipe-ids-") as scratch:
        index_files = []
        for k, part in enumerate(parts):
            start, ids = 0, []
            for table in _split_tables(part, "train"):
                excluded += _against(part, "train", start, table, small.protected, keep_overlap)
                ids.append(
                    np.stack(
                        [
                            table["id"].to_numpy(),
                            np.arange(start, start + table.num_rows),
                            table["line"].to_numpy(),
                        ],
                        axis=1,
                    )
                )
                start += table.num_rows
            path = os.path.join(scratch, f"{k}.npy")
            rows = np.concatenate(ids) if ids else np.zeros((0, 3), dtype=np.int64)
            np.save(path, rows[np.argsort(rows[:, 0], kind="stable")])
            index_files.append(path)
        excluded += _train_repeats(parts, index_files)
    first: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in excluded:  # one reason per row: the first found
        first.setdefault((row["part"], row["split"], row["row"]), row)
    return list(first.values())


def _against(
    part: VersionPart, split: str, start: int, table: pa.Table, protected: Protected, keep: bool
) -> list[dict[str, Any]]:
    """Exclusions of the rows `start`... of a part's split held in `table`."""
    gone, rejects = protected.exclude(table, split, keep)
    rows = (np.flatnonzero(gone) + start).tolist()
    return [_row(part.key, split, row, r) for row, r in zip(rows, rejects, strict=True)]


def _train_repeats(parts: list[VersionPart], index_files: list[str]) -> list[dict[str, Any]]:
    """Train pairs found in an earlier part's train split too, by id range."""
    indexes = [np.load(path, mmap_mode="r") for path in index_files]
    total = sum(len(ix) for ix in indexes)
    ranges = max(1, -(-total // RANGE_ROWS))
    bounds = [int(b) for b in np.linspace(0, 2**63, ranges + 1, dtype=np.float64)]
    bounds[-1] = 2**63
    origins = [_origin(part) for part in parts]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        chunks = []
        for k, ix in enumerate(indexes):
            a, b = np.searchsorted(ix[:, 0], [lo, hi]) if hi < 2**63 else (
                np.searchsorted(ix[:, 0], lo), len(ix))  # fmt: skip
            part = np.asarray(ix[a:b])
            chunks.append(np.column_stack([part, np.full(len(part), k)]))
        rows = np.concatenate(chunks)
        rows = rows[np.lexsort((rows[:, 3], rows[:, 0]))]  # by id, then part
        again = np.flatnonzero(rows[1:, 0] == rows[:-1, 0]) + 1
        for i in again.tolist():
            first = i - 1
            while first > 0 and rows[first - 1, 0] == rows[i, 0]:
                first -= 1
            k, survivor = int(rows[i, 3]), int(rows[first, 3])
            detail = f"same pair as {origins[survivor]}:{int(rows[first, 2])}"
            reject = Reject(origins[k], int(rows[i, 2]), DUPLICATE, detail, None, None)
            out.append(_row(parts[k].key, "train", int(rows[i, 1]), reject))
    return out


def _origin(part: VersionPart) -> str:
    _, doc = prepared.read_prepared(part.prepared)
    return str(doc["inputs"][0]["origin"]) if doc["inputs"] else part.key


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Exclusions counted per split and per reason, for the version's record."""
    return {
        "pairs": dict(Counter(r["split"] for r in rows)),
        "rejects": dict(Counter(r["reason"] for r in rows)),
    }
