"""Filesystems that fail on purpose, for the retry tests: deterministic, never random.

`FlakyMemoryFileSystem` (`flaky://`) is fsspec's memory filesystem whose data calls fail
every `fail_every`-th time with a connection reset, and always for paths matching
`always_fail`. `FlakyS3FileSystem` (`flakys3://`) is s3fs whose every `fail_every`-th
request to S3 fails with an I/O error before it is sent. `FullMemoryFileSystem`
(`fullfs://`) is a memory filesystem on a disk of `capacity` bytes: the write that
would pass it fails with ENOSPC, as a full disk's does. All are registered with fsspec
on import; use them with the in-memory runner (registrations stay in-process).
"""

from __future__ import annotations

import errno
import os
import re
from typing import Any, ClassVar

import fsspec
from fsspec.implementations.memory import MemoryFileSystem


class _Faults:
    """A call counter that fails every n-th call, and always for some paths."""

    def __init__(self) -> None:
        self.reset()

    def reset(self, fail_every: int = 0, always_fail: str | None = None) -> None:
        self.fail_every, self.calls, self.failed = fail_every, 0, 0
        self.always_fail = re.compile(always_fail) if always_fail else None

    def check(self, what: str, path: str = "") -> None:
        self.calls += 1
        if (self.always_fail and self.always_fail.search(path)) or (
            self.fail_every and self.calls % self.fail_every == 0
        ):
            self.failed += 1
            raise ConnectionResetError(errno.ECONNRESET, f"injected failure in {what} {path}")


class FlakyMemoryFileSystem(MemoryFileSystem):
    protocol = ("flaky",)
    faults: ClassVar[_Faults] = _Faults()

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        self.faults.check("open", path)
        return super()._open(path, mode, *args, **kwargs)

    def cat_file(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self.faults.check("cat_file", path)
        return super().cat_file(path, *args, **kwargs)

    def mv(self, path1: str, path2: str, *args: Any, **kwargs: Any) -> None:
        self.faults.check("mv", path2)
        super().mv(path1, path2, *args, **kwargs)

    def size(self, path: str) -> int:
        self.faults.check("size", path)
        return super().size(path)

    def find(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self.faults.check("find", path)
        return super().find(path, *args, **kwargs)


fsspec.register_implementation("flaky", FlakyMemoryFileSystem, clobber=True)


class FullMemoryFileSystem(MemoryFileSystem):
    """A memory filesystem (of its own: not `memory://`'s files) that holds at most
    `capacity` bytes written since `reset` (0: no limit)."""

    protocol = ("fullfs",)
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]
    capacity: ClassVar[int] = 0
    written: ClassVar[int] = 0

    @classmethod
    def reset(cls, capacity: int) -> None:
        cls.store.clear()
        cls.pseudo_dirs[:] = [""]
        cls.capacity, cls.written = capacity, 0

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        f = super()._open(path, mode, *args, **kwargs)
        if "r" not in mode:
            write, cls = f.write, type(self)

            def limited(data: Any) -> int:
                size = memoryview(data).nbytes
                if cls.capacity and cls.written + size > cls.capacity:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                cls.written += size
                return write(data)

            f.write = limited
        return f


fsspec.register_implementation("fullfs", FullMemoryFileSystem, clobber=True)

try:
    import s3fs
except ImportError:  # pragma: no cover - s3fs comes with the dev extras
    s3fs = None

if s3fs is not None:

    class FlakyS3FileSystem(s3fs.S3FileSystem):
        protocol = ("flakys3",)
        faults: ClassVar[_Faults] = _Faults()

        async def _call_s3(self, method: str, *args: Any, **kwargs: Any) -> Any:
            self.faults.check(method, str(kwargs.get("Key", "")))
            return await super()._call_s3(method, *args, **kwargs)

    fsspec.register_implementation("flakys3", FlakyS3FileSystem, clobber=True)
