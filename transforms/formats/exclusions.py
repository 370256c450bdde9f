"""A version's exclusions: pairs of its parts that the version leaves out.

`nmtpipe refresh` prepares each raw input alone, so a part cannot know what the other
parts hold: a pair in two inputs, or a training pair whose source is a test sentence of
another input. The version decides across all its parts (`pipelines/workflow/
version_overlap.py`) and lists what it leaves out in one Parquet file, by part, split and
row (the pair's place in the part's split, in the order of its prepared shards, which
is also the encoded order); parts are never rewritten. Readers of a version skip those
rows (`encoded_dataset.py`, the decoder's texts).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.storage import fsio

SCHEMA = pa.schema(
    [
        ("part", pa.string()),
        ("split", pa.string()),
        ("row", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("origin", pa.string()),
        ("line", pa.int64()),
        ("src", pa.binary()),
        ("tgt", pa.binary()),
    ]
)
Dropped = dict[tuple[str, str], np.ndarray]  # (part key, split) → sorted rows


def write_exclusions(url: str, rows: list[dict]) -> fsio.WrittenFile:
    """Write exclusion rows (dicts with SCHEMA's fields), sorted by part, split, row."""
    table = pa.Table.from_pylist(rows, schema=SCHEMA).sort_by(
        [("part", "ascending"), ("split", "ascending"), ("row", "ascending")]
    )
    return fsio.write_parquet(url, table)


def read_exclusions(url: str) -> Dropped:
    """The rows a version leaves out, per (part key, split)."""
    table = fsio.read_parquet(url, ["part", "split", "row"])
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    for part, split, row in zip(
        *(table[c].to_pylist() for c in ("part", "split", "row")), strict=True
    ):
        found[(part, split)].append(row)
    return {key: np.unique(np.array(rows, dtype=np.int64)) for key, rows in found.items()}


def kept_index(n: int, dropped: np.ndarray, i: int) -> int:
    """The row of the `i`-th kept pair among `n` rows of which `dropped` (sorted) go."""
    if not -(n - len(dropped)) <= i < n - len(dropped):
        raise IndexError(f"pair {i} of {n - len(dropped)}")
    i = i + n - len(dropped) if i < 0 else i
    # The k-th dropped row has k dropped rows before it: rows kept before it = row - k.
    return i + int(np.searchsorted(dropped - np.arange(len(dropped)), i, side="right"))
