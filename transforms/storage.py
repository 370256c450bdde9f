"""One fsspec code path for local disks and object stores, with atomic writes.

Every file nmtpipe writes goes through `atomic_write`: a reader sees either nothing or
the whole file, never a prefix of it, and the writer learns the size and sha256 of what
it wrote without reading it back.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import posixpath
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem


def url_to_fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem serving `url` and the path inside it."""
    return fsspec.core.url_to_fs(url)


def is_local(url: str) -> bool:
    return isinstance(url_to_fs(url)[0], LocalFileSystem)


def canonical_url(url: str) -> str:
    """`url` as manifests record it: absolute local paths, other URLs with their protocol."""
    fs, path = url_to_fs(url)
    if isinstance(fs, LocalFileSystem):
        return path
    return fs.unstrip_protocol(path)


def join(base: str, *parts: str) -> str:
    """`base/part/...` for any URL (`posixpath.join` would drop `s3://`'s double slash)."""
    cleaned = [p.strip("/") for p in parts if p]
    return "/".join([base.rstrip("/"), *cleaned]) if cleaned else base


def relative_to(root: str, url: str) -> str:
    """`url` relative to `root`; both must be canonical URLs."""
    prefix = root.rstrip("/") + "/"
    if not url.startswith(prefix):
        raise ValueError(f"{url} is not under {root}")
    return url[len(prefix) :]


def exists(url: str) -> bool:
    fs, path = url_to_fs(url)
    return fs.exists(path)


def read_bytes(url: str) -> bytes:
    fs, path = url_to_fs(url)
    return fs.cat_file(path)


def remove(url: str) -> None:
    """Delete a file if it is there."""
    fs, path = url_to_fs(url)
    with contextlib.suppress(FileNotFoundError):
        fs.rm_file(path)


def remove_tree(url: str) -> None:
    """Delete a directory and everything in it, if it is there."""
    fs, path = url_to_fs(url)
    with contextlib.suppress(FileNotFoundError):
        fs.rm(path, recursive=True)


def file_identity(url: str) -> dict[str, Any]:
    """Size plus the store's own version marker (ETag, generation, mtime...).

    Cheap to get (one metadata call) and changes whenever the content does, so it is
    what fingerprints use to notice new or changed inputs without reading them.
    """
    fs, path = url_to_fs(url)
    info = fs.info(path)
    version = None
    for key in ("ETag", "etag", "md5Hash", "generation", "mtime", "LastModified", "created"):
        if info.get(key) is not None:
            version = f"{key}={info[key]}"
            break
    return {"url": canonical_url(url), "size": int(info["size"]), "version": version}


@dataclass(frozen=True)
class WrittenFile:
    """What was committed: where, how many bytes, and their sha256."""

    url: str
    size: int
    sha256: str


class AtomicFile(io.RawIOBase):
    """The handle `atomic_write` yields: hashes and counts what passes through.

    `.written` is set once the file has been committed.
    """

    def __init__(self, raw: Any) -> None:
        super().__init__()
        self._raw = raw
        self._hash = hashlib.sha256()
        self._size = 0
        self.written: WrittenFile | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._hash.update(view)
        self._raw.write(view)
        self._size += len(view)
        return len(view)

    def tell(self) -> int:
        return self._size

    def _commit_record(self, url: str) -> None:
        self.written = WrittenFile(url=url, size=self._size, sha256=self._hash.hexdigest())


@contextlib.contextmanager
def atomic_write(url: str) -> Iterator[AtomicFile]:
    """Write `url` so that readers never see a partial file.

    Local disk: a hidden temporary file in the same directory, renamed over the target.
    Object stores: fsspec's uncommitted upload (`autocommit=False`), which S3, GCS and
    Azure only make visible on `commit()`. Other filesystems: a temporary name, then move.
    If the body raises, nothing becomes visible and the temporary data is discarded.
    """
    fs, path = url_to_fs(url)
    parent = posixpath.dirname(path)
    if parent:
        fs.makedirs(parent, exist_ok=True)
    if isinstance(fs, LocalFileSystem):
        tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as raw:
                handle = AtomicFile(raw)
                yield handle
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    elif isinstance(fs, MemoryFileSystem):
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        try:
            with fs.open(tmp, "wb") as raw:
                handle = AtomicFile(raw)
                yield handle
            fs.mv(tmp, path)
        finally:
            if fs.exists(tmp):
                fs.rm_file(tmp)
    else:
        raw = fs.open(path, "wb", autocommit=False)
        try:
            handle = AtomicFile(raw)
            yield handle
            raw.close()
            raw.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                raw.discard()
            # Mark it closed, or closing it at garbage collection would start an upload.
            raw.closed = True
            raise
    handle._commit_record(url)


def write_parquet(url: str, table: pa.Table, row_group_size: int = 65536) -> WrittenFile:
    """Write `table` as a zstd Parquet file, atomically: encoded in memory, one write."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=row_group_size)
    return write_bytes(url, sink.getvalue())


def write_bytes(url: str, data: bytes | pa.Buffer) -> WrittenFile:
    """Atomically write a whole (small) file."""
    with atomic_write(url) as f:
        f.write(data)
    assert f.written is not None
    return f.written
