"""Beam for the command line, without the optional integrations nmtpipe never uses.

`import apache_beam` loads every integration whose library happens to be installed:
pandas for Beam DataFrames, pymongo's `bson` for MongoDB IO, boto3 for Beam's own S3
filesystem. nmtpipe reads and writes through fsspec and Arrow and never uses Beam's
DataFrames, MongoDB IO or S3 filesystem, yet these imports were about 40% of Beam's
import time, which every command paid before any work (benchmarks/RESULTS.md, issue
19). Beam treats each as optional (`except ImportError`), so the `nmtpipe` command has
them look uninstalled while it imports Beam; afterwards they import normally (pyarrow
and torch's helpers may import pandas later, as they would anyway). Library users who
import nmtpipe's modules are not affected, nor are Beam's worker processes.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from types import ModuleType

# Top-level modules Beam imports only for integrations nmtpipe does not use.
UNUSED = ("pandas", "bson", "boto3")


class _Hider(importlib.abc.MetaPathFinder):
    """Reports the top-level modules `names` (and their submodules) as not installed."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden)", name=fullname)
        return None


def import_beam(unused: tuple[str, ...] = UNUSED) -> ModuleType:
    """`apache_beam`, imported with `unused` looking uninstalled meanwhile.

    A no-op if Beam is imported already (with its integrations); modules imported
    already are left alone.
    """
    hider = _Hider(tuple(name for name in unused if name not in sys.modules))
    sys.meta_path.insert(0, hider)
    try:
        return importlib.import_module("apache_beam")
    finally:
        sys.meta_path.remove(hider)
