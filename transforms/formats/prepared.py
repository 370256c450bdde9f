"""A committed `prepare` output, as its readers open it."""

from __future__ import annotations

from typing import Any

from nmtpipe.transforms.storage import manifest

KIND = "nmtpipe.prepare"  # the kind of a committed `prepare` output's manifest


def read_prepared(url: str) -> tuple[str, dict[str, Any]]:
    """The root and the checked manifest of a committed `prepare` output."""
    return manifest.open_committed(url, KIND, "prepare")
