"""Beam for the command line, without the optional integrations nmtpipe never uses.

`import apache_beam` loads every integration whose library happens to be installed:
pandas for Beam DataFrames, pymongo's `bson` for MongoDB IO, boto3 for Beam's own S3
filesystem. pyarrow, too, imports pandas when it is installed, at its first conversion
of Python or numpy data (to recognise pandas objects), and tries again at later ones.
nmtpipe reads and writes through fsspec and Arrow and never uses pandas, MongoDB or
Beam's S3 filesystem, yet these imports took longer than a small `prepare` takes with
its data (benchmarks/RESULTS.md, issue 19). Beam and pyarrow treat each of them as
optional (`except ImportError`), so the `nmtpipe` command runs as if they were not
installed. Library users who import nmtpipe's modules are not affected, nor are Beam's
worker processes (they import Beam themselves).
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from types import ModuleType

# Top-level modules Beam and pyarrow import only for integrations nmtpipe does not use.
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
    """`apache_beam`, with `unused` looking uninstalled in this process from now on.

    Modules imported already stay as they are, Beam included (with its integrations).
    """
    if not any(isinstance(finder, _Hider) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Hider(tuple(n for n in unused if n not in sys.modules)))
    return importlib.import_module("apache_beam")
