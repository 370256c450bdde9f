"""README.md beside a dataset output: a Hugging Face dataset card whose `configs` header
names each split's shards, so that `datasets.load_dataset(DIR)` loads exactly the splits.

Without it `datasets` guesses splits from file names, and an output holds more than
its splits: prepare's token counts and rejects are Parquet too, and encode's fairseq
files (`fairseq/train.en-zh.en.bin`) match the `train` pattern as its Arrow shards do.
The card lists the shard paths themselves, from the manifest being committed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.manifest import FileEntry, file_entry

CARD_FILE = "README.md"
_SPLIT_ORDER = ("train", "valid", "test")


def split_shards(files: Iterable[dict[str, Any]], kind: str) -> dict[str, list[dict[str, Any]]]:
    """The manifest entries of kind `kind`, by split, splits in train/valid/test order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(files, key=lambda f: f["path"]):
        if f["kind"] == kind:
            out.setdefault(f["split"], []).append(f)
    known = [s for s in _SPLIT_ORDER if s in out]
    return {s: out[s] for s in [*known, *sorted(set(out) - set(known))]}


def dataset_card(
    title: str, about: list[str], shards: dict[str, list[dict[str, Any]]], columns: str
) -> str:
    """The card: the `configs` header, then what the data is and its splits' sizes."""
    lines = ["---"]
    if shards:  # else nothing `datasets` reads (fairseq files only)
        lines += ["configs:", "- config_name: default", "  data_files:"]
    for split, files in shards.items():
        lines += [f"  - split: {split}", "    path:"]
        lines += [f"    - {json.dumps(f['path'])}" for f in files]
    lines += ["---", "", f"# {title}", "", *about, "", f"Columns: {columns}.", ""]
    lines += ["| split | rows | shards |", "| --- | --- | --- |"]
    for split, files in shards.items():
        lines.append(f"| {split} | {sum(f['rows'] for f in files):,} | {len(files)} |")
    lines += [
        "",
        "```python",
        "import datasets",
        'data = datasets.load_dataset("path/to/this/folder")',
        "```",
        "",
    ]
    return "\n".join(lines)


def write_card(out: str, text: str) -> FileEntry:
    """The card written into the output folder `out`, as its manifest entry."""
    written = fsio.write_bytes(fsio.join(out, CARD_FILE), text.encode("utf-8"))
    return file_entry(out, written, "card", 0)
