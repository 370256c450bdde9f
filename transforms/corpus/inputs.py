"""What is read: `CorpusInput`, one input resolved (`resolve.py`, `tables.py`) and the
reader that reads it named, and the names of files inside archives and compressed
files, which every reader opens alike."""

from __future__ import annotations

import difflib
import os
import zipfile
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.utils import infer_compression

from nmtpipe.transforms.storage.encodings import AUTO

TAR_PREFIX = "tar://"
ARCHIVE_PREFIXES = (TAR_PREFIX, "zip://")


@dataclass(frozen=True)
class CorpusInput:
    """One unit of reading: a pair of line-aligned files, one TSV file, or one table,
    read by the registered reader `reader` (`registry.py`).

    `role` is the split the pairs go to; `train` input is also where valid and test
    pairs are carved from when those splits have no input of their own. `fields`: a
    table's two fields (dotted paths into structs) or a TMX's two languages.
    `encodings`: each side's, as the user named it, or `auto`. `options`: the reader's
    `Config` where the user changed its options (None: its defaults, as older
    fingerprints recorded none).
    """

    role: str
    src: str
    tgt: str | None = None
    columns: tuple[int, int] = (0, 1)
    # Where the user named it by a relative local path: the directory it was relative to
    # (the planner's, recorded here: a worker's may be any other).
    base: str | None = None
    reader: str = "lines"
    fields: tuple[str, str] | None = None
    encodings: tuple[str, str] = (AUTO, AUTO)
    options: Any = None

    @property
    def origin(self) -> str:
        """The input as the user named it, for rejects, the `origin` column and errors:
        `data/train.{en,zh}` (relative paths stay relative, so outputs neither depend
        on nor reveal where the corpus was on the machine that prepared it)."""
        src, tgt = (self._as_given(u) if u else u for u in (self.src, self.tgt))
        return src if tgt is None else brace_pair(src, tgt)

    def _as_given(self, url: str) -> str:
        return os.path.relpath(url, self.base) if self.base else url

    def urls(self) -> list[str]:
        return [self.src] if self.tgt is None else [self.src, self.tgt]


def brace_pair(a: str, b: str) -> str:
    """`/d/train.{en,zh}.gz` for `/d/train.en.gz` and `/d/train.zh.gz`: common ends kept,
    the braces around whole words."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    while 0 < head < min(len(a), len(b)) and a[head - 1].isalnum() and a[head].isalnum():
        head -= 1  # whole words in the braces: Book1_{en,cn}.txt, not Book1_{e,c}n.txt
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    while 0 < tail < min(len(a), len(b)) - head and a[-tail].isalnum() and a[-1 - tail].isalnum():
        tail -= 1
    end = len(a) - tail, len(b) - tail
    return f"{a[:head]}{{{a[head : end[0]]},{b[head : end[1]]}}}{a[end[0] :]}"


def split_archive_url(url: str) -> tuple[str, str] | None:
    """(member, archive) for fsspec's `tar://MEMBER::ARCHIVE` chained URL, else None."""
    if not url.startswith(TAR_PREFIX) or "::" not in url:
        return None
    member, archive = url[len(TAR_PREFIX) :].split("::", 1)
    return member.lstrip("/"), archive


def archive_member(url: str) -> tuple[str, str, str] | None:
    """(protocol, member, archive) for `tar://MEMBER::ARCHIVE` and `zip://MEMBER::ARCHIVE`,
    else None."""
    for prefix in ARCHIVE_PREFIXES:
        if url.startswith(prefix) and "::" in url:
            member, archive = url[len(prefix) :].split("::", 1)
            return prefix[: -len("://")], member.lstrip("/"), archive
    return None


def file_name(url: str) -> str:
    """The name a file's format and compression are read from: an archive member's own
    (`zip://a.en.gz::b.zip` → `a.en.gz`); the last file of another chain."""
    member = archive_member(url)
    return member[1] if member else url.rsplit("::", 1)[-1]


def compression_of(url: str) -> str | None:
    """fsspec's name of the compression `url`'s name says (`gzip` for `.gz`), or None."""
    return infer_compression(file_name(url))


def without_compression(name: str) -> str:
    """`a.sgm` for `a.sgm.gz`."""
    compression = infer_compression(name)
    return name.rsplit(".", 1)[0] if compression else name


def nearest(member: str, names: list[str]) -> str:
    """The members nearest a misspelled one, as a hint (several: a pair's other side is
    often as near as the one meant)."""
    near = difflib.get_close_matches(member, names, n=3)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def missing(url: str) -> str:
    """What a missing `url` is, in one line: a member not in its zip archive (with the
    nearest), a missing archive, or a missing file."""
    archived = archive_member(url)
    if archived is None:
        return f"no such file: {url}"
    protocol, member, archive = archived
    try:
        with fsspec.open(archive, "rb") as f:
            if protocol != "zip":
                return f"no such file: {url}"
            with zipfile.ZipFile(f) as zipped:
                names = zipped.namelist()
    except FileNotFoundError:
        return f"no such file: {archive}, the archive of {url}"
    except (OSError, zipfile.BadZipFile) as e:
        return f"cannot read {archive}: {e}"
    return f"{archive} has no member {member}{nearest(member, names)}"
