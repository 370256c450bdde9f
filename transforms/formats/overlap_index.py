"""A part's train index, for the checks across a version's parts
(`pipelines/workflow/refresh/version_overlap.py`), and the row groups of a part's splits.

For every train pair of a prepared part: its id, row, line, 64-bit hashes of its two
side keys (`overlap.side_keys`) and its near-duplicate key (`neardup.near_keys`), as one
int64 array, a row per name of `COLUMNS` (each contiguous), the pairs sorted by id. Built
once, the first time a version holds the part, and kept beside it as
`parts/{key}/overlap-{digest}.npy`, the digest naming the train shards it describes
(a part prepared again gets a new index). A later refresh then finds the pairs repeated
across parts by id, and the few train rows a valid or test pair may share a side with
by hash, and the pairs equal but for punctuation, spacing and case by their key,
without reading every part's training text again: a refresh's cost follows its new
data, not the corpus. Side hashes only pick candidates; those rows are read and compared
as text.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.formats import prepared
from nmtpipe.transforms.quality.kinds.neardup import near_keys
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.text.overlap import side_keys
from nmtpipe.transforms.text.string_hash import hash64

COLUMNS = ("id", "row", "line", "src", "tgt", "near")  # src, tgt: side-key hashes
_FORMAT = 3  # bump when the columns or the hash change: old indexes are then rebuilt
_READ = ["id", "src", "tgt", "line"]


@dataclass(frozen=True)
class VersionPart:
    """A part as the checks across a version see it."""

    key: str
    prepared: str  # URL of its prepared output
    folder: str  # URL of the part's folder, where its index is kept


@dataclass(frozen=True)
class RowGroup:
    """Where rows `start`.. of a part's split are: row group `group` of `url`."""

    url: str
    group: int
    start: int
    rows: int


def row_groups(part: VersionPart, split: str) -> list[RowGroup]:
    """The row groups of a part's split, in row order (footers only)."""
    root, doc = prepared.read_prepared(part.prepared)
    out, start = [], 0
    for rel in _split_files(doc, split):
        url = fsio.join(root, rel)
        for group, rows in enumerate(fsio.parquet_row_groups(url)):
            out.append(RowGroup(url, group, start, rows))
            start += rows
    return out


def index_url(part: VersionPart) -> str:
    """Where the index of the part's current train shards is (or will be) kept."""
    _, doc = prepared.read_prepared(part.prepared)
    files = set(_split_files(doc, "train"))
    train = sorted((f["path"], f["sha256"]) for f in doc["files"] if f["path"] in files)
    digest = hashlib.sha256(json.dumps([_FORMAT, train]).encode()).hexdigest()[:16]
    return fsio.join(part.folder, f"overlap-{digest}.npy")


def _split_files(doc: dict[str, Any], split: str) -> list[str]:
    return doc["splits"].get(split, {}).get("files", [])


def open_index(part: VersionPart, scratch: str) -> np.ndarray:
    """The part's index, memory-mapped from local disk (copied to `scratch` first when
    the root is remote); built and kept first if it is missing or unreadable."""
    url = index_url(part)
    local = _local_copy(url, os.path.join(scratch, f"{part.key}.npy"))
    if local is not None:
        try:
            return np.load(local, mmap_mode="r")
        except (ValueError, OSError):  # not a whole .npy: written over, or damaged
            pass
    index = build_index(part)
    out = io.BytesIO()
    np.save(out, index)
    fsio.write_bytes(url, out.getvalue())
    return index


def _local_copy(url: str, path: str) -> str | None:
    """A local path to `url`'s bytes (copied to `path` if remote), or None if absent."""
    if not fsio.exists(url):
        return None
    if fsio.is_local(url):
        return fsio.url_to_fs(url)[1]
    fs, remote = fsio.url_to_fs(url)
    fs.get(remote, path)
    return path


def build_index(part: VersionPart) -> np.ndarray:
    """The index of a part's train split, read a row group at a time (it holds 48 bytes
    a pair, the training text about three times that)."""
    blocks = [np.zeros((len(COLUMNS), 0), dtype=np.int64)]
    for group in row_groups(part, "train"):
        table = fsio.read_parquet(group.url, _READ, [group.group])
        blocks.append(_index_block(table, group.start))
    index = np.concatenate(blocks, axis=1)
    return np.ascontiguousarray(index[:, np.argsort(index[0], kind="stable")])


def _index_block(table: pa.Table, start: int) -> np.ndarray:
    return np.stack(
        [
            table["id"].to_numpy(),
            np.arange(start, start + table.num_rows),
            table["line"].to_numpy(),
            key_hashes(side_keys(table["src"])),
            key_hashes(side_keys(table["tgt"])),
            near_keys(table["src"].to_pylist(), table["tgt"].to_pylist()).view(np.int64),
        ]
    )


def key_hashes(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Side keys hashed as the index holds them."""
    return hash64(keys).view(np.int64)
