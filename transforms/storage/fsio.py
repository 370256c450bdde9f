"""One fsspec code path for local disks and object stores, with atomic writes.

Every file nmtpipe writes goes through `atomic_write`: a reader sees either nothing or
the whole file, never a prefix of it, and the writer learns the size and sha256 of what
it wrote without reading it back. Whole-file reads and writes and metadata calls are
retried on transient errors (`retry.py`); big files are written locally
first (`spooled_write`) so that their upload can be retried too.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import io
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from nmtpipe.transforms.errors import (
    ConfigError,
    InputError,
    NoSpaceError,
    OutputError,
    StorageError,
)
from nmtpipe.transforms.storage.retry import failure, policy_for, retrying

_COPY_BLOCK = 8 << 20


# The extra (pyproject's optional dependencies) that installs each store's filesystem.
_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure",
           "abfss": "azure", "hf": "hf"}  # fmt: skip


def url_to_fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem serving `url` and the path inside it; ConfigError naming the extra
    to install when its filesystem is not installed."""
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as e:
        protocol = url.split("://", 1)[0] if "://" in url else ""
        extra = _EXTRAS.get(protocol)
        install = f": pip install 'nmtpipe[{extra}]'" if extra else ""
        raise ConfigError(
            f"{url}: {protocol}:// needs a package not installed{install} ({e})"
        ) from None


def is_local(url: str) -> bool:
    return isinstance(url_to_fs(url)[0], LocalFileSystem)


@contextlib.contextmanager
def open_for_arrow(url: str) -> Iterator[Any]:
    """`url` opened for reading by Arrow's readers: by Arrow's own I/O where the file is
    local (a quarter of the time a Python file object takes to open an IPC file and
    read one batch), else by fsspec."""
    fs, path = url_to_fs(url)
    if isinstance(fs, LocalFileSystem):
        with pa.OSFile(path) as f:
            yield f
    else:
        with fs.open(path, "rb") as f:
            yield f


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


def on_object_store(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether `fs` is a bucket store (S3, GCS, Azure...): no folders, buckets made by
    their owners."""
    return not isinstance(fs, LocalFileSystem | MemoryFileSystem)


@functools.cache
def _look_for_bucket(fs: fsspec.AbstractFileSystem, bucket: str, what: str) -> None:
    """Return if `bucket` is there, else raise what its store answered. Exceptions are
    not cached: only a bucket found is not looked for again in this process."""
    retrying(lambda: fs.info(bucket), what, policy_for(fs))


def require_bucket(url: str, input_option: str | None = None) -> None:
    """Stop with one line when `url` is on an object store whose bucket cannot be
    written (or, for an input named by `input_option`, read): it does not exist, access
    to it is denied, or its store does not answer.

    nmtpipe never creates a bucket: s3fs's `makedirs` would create a missing one
    silently, so a typo in a bucket name would make (and bill) a new bucket. The bucket
    is looked at itself (`info`, not `exists`, which s3fs answers False to any error:
    an unreachable endpoint would read as a missing bucket)."""
    fs, path = url_to_fs(url)
    if not on_object_store(fs):
        return
    bucket = path.split("/", 1)[0]
    what = f"look for the bucket {bucket}"
    named = f"{input_option} {url}" if input_option else url
    try:
        _look_for_bucket(fs, bucket, what)
    except FileNotFoundError:
        if input_option:
            raise InputError(
                f"{named}: the bucket {bucket} does not exist; correct its name"
            ) from None
        raise OutputError(
            f"{url}: the bucket {bucket} does not exist; nmtpipe creates no buckets: "
            "create it, or correct its name"
        ) from None
    except PermissionError as e:
        may = "read" if input_option else "list and write"
        raise (InputError if input_option else OutputError)(
            f"{named}: access to the bucket {bucket} is denied ({e}): use credentials that "
            f"may {may} it, or correct its name"
        ) from None
    except StorageError as e:  # transient errors that lasted
        raise StorageError(f"{named}: {e}") from e
    except OSError as e:
        raise StorageError(f"{named}: {failure(what, e)}") from e


def require_output_folder(url: str) -> None:
    """Make the folder `url` (a step's output) or stop with one line saying why it
    cannot be one: a file is in the way, a parent cannot be written, or, on an object
    store, the bucket cannot be written (`require_bucket`)."""
    fs, path = url_to_fs(url)
    if on_object_store(fs):
        require_bucket(url)
        return
    try:
        fs.makedirs(path, exist_ok=True)
    except OSError as e:
        blocker = next((p for p in _ancestors(path) if fs.isfile(p)), None)
        if blocker is not None:
            what = url if blocker == path else f"{url}: {blocker}"
            raise OutputError(f"{what} is a file, not a folder; choose another output") from None
        where = f" ({e.filename})" if e.filename and e.filename != path else ""
        raise OutputError(f"{url} cannot be made a folder: {e.strerror}{where}") from None


@contextlib.contextmanager
def output_folder(url: str) -> Iterator[None]:
    """`require_output_folder` around a job that may fail: if it does, the folders made
    here are removed again unless the job left files in them (a folder that was there
    before is never removed), so that a failed command leaves no empty output behind."""
    fs, path = url_to_fs(url)
    made = None
    if not on_object_store(fs):
        made = next((p for p in reversed(_ancestors(path)) if not fs.exists(p)), None)
    require_output_folder(url)
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):  # the job's error is the one to tell
            if made is not None and not fs.find(made):
                fs.rm(made, recursive=True)
        raise


def _ancestors(path: str) -> list[str]:
    """`path` and the folders above it, nearest first."""
    found = [path]
    while (parent := posixpath.dirname(found[-1])) not in (found[-1], ""):
        found.append(parent)
    return found


def make_parent(url: str) -> None:
    """Make the folder `url` is written into: on a local disk; on an object store,
    which has no folders, only check that its bucket exists."""
    fs, path = url_to_fs(url)
    if on_object_store(fs):
        require_bucket(url)
        return
    parent = posixpath.dirname(path)
    if parent:
        fs.makedirs(parent, exist_ok=True)


def exists(url: str) -> bool:
    fs, path = url_to_fs(url)
    return retrying(lambda: fs.exists(path), f"look for {url}", policy_for(fs))


def is_folder(url: str) -> bool:
    """Whether `url` is a folder (on an object store: a prefix other files are under)."""
    fs, path = url_to_fs(url)
    return bool(retrying(lambda: fs.isdir(path), f"look at {url}", policy_for(fs)))


def read_bytes(url: str) -> bytes:
    fs, path = url_to_fs(url)
    return retrying(lambda: fs.cat_file(path), f"read {url}", policy_for(fs))


def read_bytes_hashed(url: str) -> tuple[bytes, str]:
    """A whole file and the sha256 of its bytes, hashed block by block as they arrive
    (one pass; the read is retried as a whole)."""
    fs, path = url_to_fs(url)

    def read() -> tuple[bytes, str]:
        h = hashlib.sha256()
        blocks = []
        with fs.open(path, "rb") as f:
            for block in iter(lambda: f.read(_COPY_BLOCK), b""):
                h.update(block)
                blocks.append(block)
        return b"".join(blocks), h.hexdigest()

    return retrying(read, f"read {url}", policy_for(fs))


def size(url: str) -> int:
    fs, path = url_to_fs(url)
    return int(retrying(lambda: fs.size(path), f"look at {url}", policy_for(fs)))


def sha256_of(url: str) -> str:
    """The sha256 of a file's content, streamed (the read is retried as a whole)."""
    fs, path = url_to_fs(url)

    def digest() -> str:
        h = hashlib.sha256()
        with fs.open(path, "rb") as f:
            for block in iter(lambda: f.read(_COPY_BLOCK), b""):
                h.update(block)
        return h.hexdigest()

    return retrying(digest, f"read {url}", policy_for(fs))


def find(url: str) -> list[str]:
    """The URLs of every file under the folder `url` (none if it does not exist)."""
    fs, path = url_to_fs(url)
    found = retrying(lambda: fs.find(path, withdirs=False), f"list {url}", policy_for(fs))
    return sorted(canonical_url(fs.unstrip_protocol(p)) for p in found)


def remove(url: str) -> None:
    """Delete a file if it is there."""
    fs, path = url_to_fs(url)

    def rm() -> None:
        with contextlib.suppress(FileNotFoundError):
            fs.rm_file(path)

    retrying(rm, f"delete {url}", policy_for(fs))


def remove_tree(url: str) -> None:
    """Delete a directory and everything in it, if it is there."""
    fs, path = url_to_fs(url)

    def rm() -> None:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(path, recursive=True)

    retrying(rm, f"delete {url}", policy_for(fs))


def file_identity(url: str) -> dict[str, Any]:
    """Size plus the store's own version marker (ETag, generation, mtime...).

    Cheap to get (one metadata call) and changes whenever the content does, so it is
    what fingerprints use to notice new or changed inputs without reading them.
    """
    fs, path = url_to_fs(url)
    info = retrying(lambda: fs.info(path), f"look at {url}", policy_for(fs))
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


_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})  # a disk full, a quota used up


@contextlib.contextmanager
def naming_a_full_disk(url: str, where: str | None = None) -> Iterator[None]:
    """A full disk met while writing `url` (through `where`, a local file that stands
    in for it) as the one line that names it, not an OSError without a path."""
    try:
        yield
    except OSError as e:
        if e.errno not in _FULL:
            raise
        through = f" (through {where})" if where else ""
        reason = os.strerror(e.errno).lower()
        raise NoSpaceError(f"could not write {url}{through}: {reason}") from e


@contextlib.contextmanager
def atomic_write(url: str) -> Iterator[AtomicFile]:
    """Write `url` so that readers never see a partial file.

    Local disk: a hidden temporary file in the same directory, renamed over the target.
    Object stores: fsspec's uncommitted upload (`autocommit=False`), which S3, GCS and
    Azure only make visible on `commit()`. Other filesystems: a temporary name, then move.
    If the body raises, nothing becomes visible and the temporary data is discarded; a
    full disk is an error naming `url` (`naming_a_full_disk`).
    """
    with naming_a_full_disk(url), _atomic_write(url) as handle:
        yield handle


@contextlib.contextmanager
def _atomic_write(url: str) -> Iterator[AtomicFile]:
    fs, path = url_to_fs(url)
    make_parent(url)
    if isinstance(fs, LocalFileSystem):
        folder, name = os.path.split(path)
        tmp = os.path.join(folder, f".{name}.tmp-{uuid.uuid4().hex}")
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
    """Write `table` as a zstd Parquet file, atomically: encoded in memory, one write.

    Every page carries a CRC32 (`write_page_checksum`), which `read_parquet` checks: a
    reader of some row groups verifies exactly the pages it reads."""
    sink = pa.BufferOutputStream()
    pq.write_table(
        table, sink, compression="zstd", row_group_size=row_group_size, write_page_checksum=True
    )
    return write_bytes(url, sink.getvalue())


def parquet_file(source: Any) -> pq.ParquetFile:
    """A Parquet file opened so that every page read is checked against its CRC32 (pages
    written without one, by older nmtpipe versions, are read unchecked)."""
    if isinstance(source, bytes | bytearray | memoryview):
        source = pa.BufferReader(source)
    return pq.ParquetFile(source, page_checksum_verification=True)


def write_bytes(url: str, data: bytes | pa.Buffer) -> WrittenFile:
    """Atomically write a whole (small) file."""

    def write() -> WrittenFile:
        with atomic_write(url) as f:
            f.write(data)
        assert f.written is not None
        return f.written

    return retrying(write, f"write {url}", policy_for(url_to_fs(url)[0]))


def read_parquet(
    url: str, columns: list[str] | None = None, row_groups: list[int] | None = None
) -> pa.Table:
    """A whole Parquet file, or some of its row groups, read (and retried) as one piece."""

    def read() -> pa.Table:
        with open_for_arrow(url) as f:
            return read_row_groups(parquet_file(f), columns, row_groups)

    return retrying(read, f"read {url}", policy_for(url_to_fs(url)[0]))


def read_row_groups(
    parquet: pq.ParquetFile, columns: list[str] | None, row_groups: list[int] | None
) -> pa.Table:
    """All of `parquet`, or the row groups `row_groups`, as one table."""
    if row_groups is None:
        return parquet.read(columns=columns)
    return parquet.read_row_groups(row_groups, columns=columns)


def parquet_row_groups(url: str) -> list[int]:
    """The number of rows in each row group of a Parquet file (reads only its footer)."""

    def read() -> list[int]:
        with open_for_arrow(url) as f:
            meta = pq.ParquetFile(f).metadata
            return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]

    return retrying(read, f"read {url}", policy_for(url_to_fs(url)[0]))


def upload(local_path: str, url: str) -> WrittenFile:
    """Atomically copy a local file to `url` (streamed; retried as a whole)."""

    def copy() -> WrittenFile:
        with open(local_path, "rb") as src, atomic_write(url) as f:
            shutil.copyfileobj(src, f, _COPY_BLOCK)
        assert f.written is not None
        return f.written

    return retrying(copy, f"write {url}", policy_for(url_to_fs(url)[0]))


@contextlib.contextmanager
def spooled_write(url: str) -> Iterator[AtomicFile]:
    """Write a file too big to hold in memory so that its upload can be retried.

    Local targets are written in place with `atomic_write`; other stores get a local
    temporary file that is uploaded, with retries, when the body is done.
    As with `atomic_write`, the handle's `.written` is set after the `with` block.
    """
    if is_local(url):
        with atomic_write(url) as handle:
            yield handle
        return
    with tempfile.TemporaryDirectory(prefix="nmtpipe-spool-") as folder:
        local = os.path.join(folder, "file")
        with naming_a_full_disk(url, local), open(local, "wb") as raw:
            handle = AtomicFile(raw)
            yield handle
        handle.written = upload(local, url)
