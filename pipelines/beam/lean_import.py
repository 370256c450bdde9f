"""Beam for the command line, without the optional integrations nmtpipe never uses.

`import apache_beam` loads every integration whose library happens to be installed:
pandas for Beam DataFrames, pymongo's `bson` for MongoDB IO, boto3 for Beam's own S3
filesystem. nmtpipe reads and writes through fsspec and Arrow and never uses Beam's
DataFrames, MongoDB IO or S3 filesystem, yet these imports were about 40% of Beam's
import time, which every command paid before any work (benchmarks/RESULTS.md). Beam
treats each as optional (`except ImportError`), so the `nmtpipe` command has them look
uninstalled while it imports Beam; afterwards they import normally. Library
users who import nmtpipe's modules are not affected, nor are Beam's worker processes.

pyarrow asks once, on its first conversion of Python objects (`pa.array` of a list),
whether pandas is installed, and imports it if so: 0.13 s of a 2 s command for a
library nmtpipe never hands it. Asked while pandas looks uninstalled, it remembers the
answer; a call that needs pandas (`Table.to_pandas`, `Table.from_pandas`) still imports
it then. Until such a call, `pa.array` would take a pandas object for a plain sequence
(a Series with missing strings is refused); nmtpipe never hands it one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings
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
    """`apache_beam`, imported with `unused` looking uninstalled meanwhile; pyarrow
    asked about pandas meanwhile too, if pandas is among them.

    A no-op if Beam is imported already (with its integrations); modules imported
    already are left alone. A Beam that needs one of them after all gets it: imported
    again without hiding.
    """
    hider = _Hider(tuple(name for name in unused if name not in sys.modules))
    sys.meta_path.insert(0, hider)
    try:
        with warnings.catch_warnings():  # (what Beam's dependencies warn of at import)
            warnings.simplefilter("ignore")
            beam = importlib.import_module("apache_beam")
        if "pandas" in hider.names:
            importlib.import_module("pyarrow").array([])
        return beam
    except ImportError as e:
        if (e.name or "").partition(".")[0] not in hider.names:
            raise
    finally:
        sys.meta_path.remove(hider)
    return importlib.import_module("apache_beam")
