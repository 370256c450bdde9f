"""A committed `prepare` output, as its readers open it."""

from __future__ import annotations

from typing import Any

from nmtpipe.transforms.storage import manifest

KIND = "nmtpipe.prepare"  # the kind of a committed `prepare` output's manifest


def read_prepared(url: str) -> tuple[str, dict[str, Any]]:
    """The root and the checked manifest of a committed `prepare` output."""
    return manifest.open_committed(url, KIND, "prepare")


def pair_bytes(doc: dict[str, Any], split: str | None = None) -> int:
    """The size of a prepared output's pair shards (of `split`, or of all), from its
    manifest: what a step reading them has to read."""
    return sum(
        f["size"]
        for f in doc["files"]
        if f.get("kind") == "pairs" and split in (None, f.get("split"))
    )
