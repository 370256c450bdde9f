"""What a version leaves out of its parts: duplicates and overlap across inputs.

Each part of a refresh was prepared alone, deduplicated and decontaminated within
itself. A version holds several, and must hold what one `nmtpipe prepare` of all its
inputs would: no pair twice, none in two splits, no train or valid pair sharing a side
with a test pair, no train pair with a valid pair (`transforms/text/overlap.py`). So
before publishing, the driver looks across the parts (taken in input order, so that the
copy from the first input survives, as in a one-shot prepare):

- valid and test splits (small) are read whole: repeats across parts go, and every
  valid and test pair goes into the `Protected` set;
- train splits are looked at through each part's index (`formats/overlap_index.py`: ids
  and side-key hashes, kept from one refresh to the next): the rows whose id or side hash
  the `Protected` set holds are read and checked against it as text, and the indexes
  are merged by id range, so that a pair in two parts' training data is found with
  memory bounded by one range;
- where the parts find near-duplicates (the `neardup` scorer), pairs equal but for
  punctuation, spacing and case across parts are found the same way, by ranges of their
  key (`neardup.near_keys`), the valid and test pairs among them; of each group the pair
  one prepare of all inputs keeps stays (`neardup.RANK`). MinHash's bands, where on,
  stay within each part.

The result is a list of exclusions (`transforms/formats/exclusions.py`); parts stay as
they are, so the next version can decide again.
"""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.formats import prepared
from nmtpipe.transforms.formats.overlap_index import (
    COLUMNS,
    VersionPart,
    key_hashes,
    open_index,
    row_groups,
)
from nmtpipe.transforms.quality.judge import NEAR_DUPLICATE
from nmtpipe.transforms.quality.kinds.neardup import RANK, near_keys
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.text.filters import DUPLICATE
from nmtpipe.transforms.text.overlap import Protected
from nmtpipe.transforms.text.records import Reject, reject_rows
from nmtpipe.transforms.text.split import SPLITS

_COLUMNS = ["id", "src", "tgt", "origin", "line"]
RANGE_ROWS = 2_000_000  # train ids held at once per id range, across all parts


def _row(part: str, split: str, row: int, reject: dict[str, Any]) -> dict[str, Any]:
    return {"part": part, "split": split, "row": row, **reject}


def _split_table(part: VersionPart, split: str) -> pa.Table | None:
    """A part's whole split (None if it has none)."""
    tables = [fsio.read_parquet(g.url, _COLUMNS, [g.group]) for g in row_groups(part, split)]
    return pa.concat_tables(tables) if tables else None


class _Small:
    """The valid and test splits of all parts, their repeats across parts found."""

    def __init__(self, parts: list[VersionPart]) -> None:
        self.protected = Protected()
        self.tables: dict[str, pa.Table | None] = {}  # "{part key}/{split}": its rows
        self.excluded: list[dict[str, Any]] = []
        for split in ("test", "valid"):
            seen: dict[int, str] = {}
            for part in parts:
                table = self.tables[f"{part.key}/{split}"] = _split_table(part, split)
                if table is None:
                    continue
                self.protected.merge(Protected.of_batch(split, table))
                for row, (pair, origin, line) in enumerate(
                    zip(*(table[c].to_pylist() for c in ("id", "origin", "line")), strict=True)
                ):
                    if pair in seen:
                        detail = f"same pair as {seen[pair]}"
                        reject = reject_rows(table, np.array([row]), DUPLICATE, detail)
                        self.excluded.append(_row(part.key, split, row, reject.to_pylist()[0]))
                    else:
                        seen[pair] = f"{origin}:{line}"
        # What train rows are looked up in (`_member`).
        self.ids = _value_set([k.to_numpy() for k in self.protected.keys("id")])
        self.hashes = {
            name: _value_set([key_hashes(k) for k in self.protected.keys(name)])
            for name in ("src", "tgt")
        }


def _value_set(arrays: list[np.ndarray]) -> pa.Array:
    return pa.array(np.concatenate([np.zeros(0, np.int64), *arrays]))


def _member(values: np.ndarray, value_set: pa.Array) -> np.ndarray:
    """Which `values` are in `value_set` (Arrow's hash look-up: a few times faster than
    `np.isin`, which sorts)."""
    found = pc.is_in(pa.array(values), value_set=value_set)
    return found.to_numpy(zero_copy_only=False)


def version_exclusions(parts: list[VersionPart], keep_overlap: bool) -> list[dict[str, Any]]:
    """The exclusions of a version of `parts` (in input order), as rows for
    `exclusions.write_exclusions`."""
    small = _Small(parts)
    excluded = list(small.excluded)
    for part in parts:
        valid = small.tables[f"{part.key}/valid"]
        if valid is not None:
            rows = np.arange(valid.num_rows)
            excluded += _against(part, "valid", valid, rows, small, keep_overlap)
    with tempfile.TemporaryDirectory(prefix="nmtpipe-ids-") as scratch:
        indexes = [open_index(part, scratch) for part in parts]
        for part, index in zip(parts, indexes, strict=True):
            rows = _candidates(index, small, keep_overlap)
            if len(rows):
                table = _train_rows(part, rows)
                excluded += _against(part, "train", table, rows, small, keep_overlap)
        excluded += _train_repeats(parts, indexes)
        if all(map(_finds_near_duplicates, parts)):
            excluded += _near_repeats(parts, indexes, small)
    first: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in excluded:  # one reason per row: the first found
        first.setdefault((row["part"], row["split"], row["row"]), row)
    return list(first.values())


def _against(
    part: VersionPart, split: str, table: pa.Table, rows: np.ndarray, small: _Small, keep: bool
) -> list[dict[str, Any]]:
    """Exclusions of a part's split among `table`, which holds its rows `rows`."""
    gone, rejects = small.protected.exclude(table, split, keep)
    rows = rows[gone].tolist()
    return [_row(part.key, split, row, r) for row, r in zip(rows, rejects.to_pylist(), strict=True)]


def _candidates(index: np.ndarray, small: _Small, keep: bool) -> np.ndarray:
    """The train rows, sorted, whose id or side-key hash a valid or test pair has: the
    only ones that can be excluded for them (a hash may match by chance; the text
    decides)."""
    found = []
    for lo in range(0, index.shape[1], RANGE_ROWS):
        block = np.asarray(index[:, lo : lo + RANGE_ROWS])
        hit = _member(block[COLUMNS.index("id")], small.ids)
        if not keep:
            for name in ("src", "tgt"):
                hit |= _member(block[COLUMNS.index(name)], small.hashes[name])
        found.append(block[COLUMNS.index("row"), hit])
    return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def _train_rows(part: VersionPart, rows: np.ndarray) -> pa.Table:
    """Rows `rows` (sorted) of a part's train split, reading only their row groups."""
    pieces = []
    for group in row_groups(part, "train"):
        a, b = np.searchsorted(rows, [group.start, group.start + group.rows])
        if a < b:
            table = fsio.read_parquet(group.url, _COLUMNS, [group.group])
            pieces.append(table.take(pa.array(rows[a:b] - group.start)))
    return pa.concat_tables(pieces)


def _train_repeats(parts: list[VersionPart], indexes: list[np.ndarray]) -> list[dict[str, Any]]:
    """Train pairs found in an earlier part's train split too, by id range."""
    total = sum(ix.shape[1] for ix in indexes)
    ranges = max(1, -(-total // RANGE_ROWS))
    bounds = [int(b) for b in np.linspace(0, 2**63, ranges + 1, dtype=np.float64)]
    bounds[-1] = 2**63
    origins = [_origin(part) for part in parts]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        chunks = []
        for k, ix in enumerate(indexes):
            a, b = np.searchsorted(ix[0], [lo, hi]) if hi < 2**63 else (
                np.searchsorted(ix[0], lo), ix.shape[1])  # fmt: skip
            part = np.asarray(ix[:3, a:b]).T  # id, row, line
            chunks.append(np.column_stack([part, np.full(len(part), k)]))
        rows = np.concatenate(chunks)  # sorted runs, one per part, in part order
        rows = rows[np.argsort(rows[:, 0], kind="stable")]  # by id, then part
        again = np.flatnonzero(rows[1:, 0] == rows[:-1, 0]) + 1
        for i in again.tolist():
            first = i - 1
            while first > 0 and rows[first - 1, 0] == rows[i, 0]:
                first -= 1
            k, survivor = int(rows[i, 3]), int(rows[first, 3])
            detail = f"same pair as {origins[survivor]}:{int(rows[first, 2])}"
            reject = Reject(origins[k], int(rows[i, 2]), DUPLICATE, detail, None, None)
            out.append(_row(parts[k].key, "train", int(rows[i, 1]), reject._asdict()))
    return out


def _finds_near_duplicates(part: VersionPart) -> bool:
    _, doc = prepared.read_prepared(part.prepared)
    return "neardup" in doc["options"].get("quality", {}).get("scorers", [])


# The columns of `_near_repeats`' rows, all int64 (`origin`: an index into its origins).
_NEAR = ("near", "rank", "id", "part", "split", "row", "line", "origin")
_AT = {name: k for k, name in enumerate(_NEAR)}


def _near_repeats(
    parts: list[VersionPart], indexes: list[np.ndarray], small: _Small
) -> list[dict[str, Any]]:
    """Pairs repeating a pair of another part (or split) but for punctuation, spacing
    and case, by ranges of their key: all but the one that stays of each group, which
    they name. Copies of it (its id) are left to the checks of duplicates above."""
    origins = [_origin(part) for part in parts]
    listed = _small_near_rows(parts, small, origins)
    total = sum(ix.shape[1] for ix in indexes) + len(listed)
    ranges = max(1, -(-total // RANGE_ROWS))
    out = []
    for k in range(ranges):
        rows = np.concatenate(
            [listed[_in_range(listed[:, 0], k, ranges)]]
            + [_train_near_rows(ix, p, k, ranges) for p, ix in enumerate(indexes)]
        )
        rows = rows[np.lexsort([rows[:, _AT[c]] for c in ("part", "id", "rank", "near")])]
        near, ids = rows[:, _AT["near"]], rows[:, _AT["id"]]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = near[1:] != near[:-1]
        keeper = np.maximum.accumulate(np.where(first, np.arange(len(rows)), 0))
        again = np.flatnonzero(ids != ids[keeper])
        for i, kept in zip(again.tolist(), keeper[again].tolist(), strict=True):
            row = dict(zip(_NEAR, rows[i].tolist(), strict=True))
            stays = dict(zip(_NEAR, rows[kept].tolist(), strict=True))
            detail = f"like the pair at {origins[stays['origin']]}:{stays['line']}"
            reject = Reject(origins[row["origin"]], row["line"], NEAR_DUPLICATE, detail, None, None)
            out.append(
                _row(parts[row["part"]].key, SPLITS[row["split"]], row["row"], reject._asdict())
            )
    return out


def _in_range(near: np.ndarray, k: int, ranges: int) -> np.ndarray:
    return near.view(np.uint64) % np.uint64(ranges) == k


def _train_near_rows(index: np.ndarray, part: int, k: int, ranges: int) -> np.ndarray:
    """A part's train rows with their near key in range k (`_NEAR`), from its index a
    block at a time."""
    found = [np.zeros((0, len(_NEAR)), dtype=np.int64)]
    for lo in range(0, index.shape[1], RANGE_ROWS):
        block = np.asarray(index[:, lo : lo + RANGE_ROWS])
        hit = _in_range(block[COLUMNS.index("near")], k, ranges)
        column = {c: block[COLUMNS.index(c), hit] for c in ("near", "id", "row", "line")}
        n = int(hit.sum())
        found.append(
            np.column_stack([column["near"], np.full(n, RANK["train"]), column["id"],
                             np.full(n, part), np.full(n, SPLITS.index("train")), column["row"],
                             column["line"], np.full(n, part)])
        )  # fmt: skip
    return np.concatenate(found)


def _small_near_rows(parts: list[VersionPart], small: _Small, origins: list[str]) -> np.ndarray:
    """Every valid and test row of the parts (`_NEAR`); their inputs' names are added to
    `origins`, where a row's last column points."""
    found = [np.zeros((0, len(_NEAR)), dtype=np.int64)]
    for p, part in enumerate(parts):
        for split in ("test", "valid"):
            table = small.tables[f"{part.key}/{split}"]
            if table is None:
                continue
            names = table["origin"].to_pylist()
            named = {name: len(origins) + k for k, name in enumerate(dict.fromkeys(names))}
            origins += named
            n = table.num_rows
            found.append(
                np.column_stack([
                    near_keys(table["src"].to_pylist(), table["tgt"].to_pylist()).view(np.int64),
                    np.full(n, RANK[split]), table["id"].to_numpy(), np.full(n, p),
                    np.full(n, SPLITS.index(split)), np.arange(n), table["line"].to_numpy(),
                    np.array([named[name] for name in names], dtype=np.int64),
                ])
            )  # fmt: skip
    return np.concatenate(found)


def _origin(part: VersionPart) -> str:
    _, doc = prepared.read_prepared(part.prepared)
    return str(doc["inputs"][0]["origin"]) if doc["inputs"] else part.key


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Exclusions counted per split and per reason, for the version's record."""
    return {
        "pairs": dict(Counter(r["split"] for r in rows)),
        "rejects": dict(Counter(r["reason"] for r in rows)),
    }
