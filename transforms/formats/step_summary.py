"""The summary a step's pipeline leaves for its driver: the files it wrote (their
manifest entries) and its merged statistics, one small JSON file, so that the driver
writes the manifest without listing or reading any data. Written by Beam
(`transforms/beam/summary.py`), read by the driver, which imports no Beam for it."""

from __future__ import annotations

import json
from typing import Any

from nmtpipe.transforms.storage import fsio


def write_summary(summary: dict[str, Any], url: str) -> None:
    fsio.write_bytes(url, json.dumps(summary).encode())


def read_summary(url: str) -> dict[str, Any]:
    return json.loads(fsio.read_bytes(url))
