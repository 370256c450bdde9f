"""A committed `prepare` output, as its readers open it, and its alphabet file."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nmtpipe.transforms.formats.shard_names import CHARS_PATH
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.manifest import FileEntry, file_entry
from nmtpipe.transforms.vocab import counts

KIND = "nmtpipe.prepare"  # the kind of a committed `prepare` output's manifest


def read_prepared(url: str, option: str | None = None) -> tuple[str, dict[str, Any]]:
    """The root and the checked manifest of a committed `prepare` output (named by the
    user's `option`, when it was)."""
    return manifest.open_committed(url, KIND, "prepare", option=option)


def pair_bytes(doc: dict[str, Any], split: str | None = None) -> int:
    """The size of a prepared output's pair shards (of `split`, or of all), from its
    manifest: what a step reading them has to read."""
    return sum(
        f["size"]
        for f in doc["files"]
        if f.get("kind") == "pairs" and split in (None, f.get("split"))
    )


def write_chars(per_side: Iterable[tuple[str, dict[str, int]]], output: str) -> FileEntry:
    """The character counts of each side (`counts/chars.parquet`), and its entry."""
    per_side = dict(per_side)
    written = counts.write_chars(fsio.join(output, CHARS_PATH), per_side)
    return file_entry(output, written, "chars", sum(len(c) for c in per_side.values()))
