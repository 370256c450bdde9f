"""The sizes of archive members as their archive's index records them, read without
reading the members: what the plan of an input in a `tar://` or `zip://` archive is
sized from (its shard count, its progress bar and ETA), as a plain file's is from its
size.
"""

from __future__ import annotations

import lzma
import tarfile
import zlib
from collections.abc import Collection
from typing import BinaryIO
from zipfile import BadZipFile, ZipFile

import fsspec

# What reading a damaged, truncated or unknown archive raises: the estimate then falls
# back, and the reader reports the damage when it gets there.
_INDEX_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, tarfile.TarError, BadZipFile)


def member_sizes(protocol: str, archive: str, members: Collection[str]) -> dict[str, int]:
    """The uncompressed sizes of those of `members` that `archive` holds as regular
    files (`protocol`: `tar` or `zip`), by name; one opening of `archive` for them all.

    A zip's central directory, at its end, records every member's size: reading it
    inflates nothing. A tar has no index: each member's header stands in front of its
    data, so the headers are found in one forward pass over the archive, decompressing
    a `.tgz` as it goes (as its reader will) in blocks, never holding a member: memory
    stays bounded whatever the archive's size, and the pass stops once every member
    wanted is found. Either is read once per archive, however many of its members are
    inputs.

    A member not found, or an archive that cannot be read, is left out of the answer
    (the caller falls back on an estimate; the reader reports the problem). A member's
    size is its bytes in the archive: a `.gz` member's is the compressed size.
    """
    wanted = set(members)
    found: dict[str, int] = {}
    try:
        with fsspec.open(archive, "rb") as f:
            if protocol == "zip":
                with ZipFile(f) as zipped:
                    infos = zipped.infolist()
                found = {i.filename: i.file_size for i in infos if not i.is_dir()}
            else:
                found = _tar_sizes(f, wanted)
    except _INDEX_ERRORS:
        pass
    return {name: size for name, size in found.items() if name in wanted}


def _tar_sizes(f: BinaryIO, wanted: set[str]) -> dict[str, int]:
    """The sizes of the regular files of the tar stream `f` (compressed or not) named in
    `wanted`, found in one forward pass that ends at the last of them; what was found
    before a read error is kept."""
    found: dict[str, int] = {}
    try:
        with tarfile.open(fileobj=f, mode="r|*") as tar:
            while len(found) < len(wanted) and (info := tar.next()) is not None:
                # A stream keeps every header it has read; a size is all that is needed.
                tar.members.clear()
                name = info.name.removeprefix("./")
                if name in wanted and info.isfile():
                    found[name] = info.size
    except _INDEX_ERRORS:
        pass
    return found
