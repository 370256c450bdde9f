"""fairseq's memory-mapped indexed dataset (`.bin` + `.idx`), written and read.

The layout is `fairseq.data.indexed_dataset.MMapIndexedDataset`'s, byte for byte:

- `PREFIX.bin`: every item's ids, concatenated, in the item dtype;
- `PREFIX.idx`: the magic `MMIDIDX\\x00\\x00`, version 1 (`<Q`), the dtype's code in
  fairseq's table (`<B`), the item count (`<Q`), then each item's size (int32) and
  each item's byte offset into the `.bin` (int64).

The writer streams items into the `.bin` and keeps only their sizes (4 bytes an item)
for the index; the reader maps both files and slices items out without copying.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import BinaryIO

import numpy as np

from nmtpipe.transforms.errors import ManifestError

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
# fairseq's `_code_to_dtype`, without its duplicate float64 entry (code 7).
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.uint16): 8,
    np.dtype(np.uint32): 9,
    np.dtype(np.uint64): 10,
}
_CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()} | {7: np.dtype(np.float64)}
_HEADER = struct.Struct("<9sQBQ")


def bin_name(prefix: str) -> str:
    return f"{prefix}.bin"


def idx_name(prefix: str) -> str:
    return f"{prefix}.idx"


class MMapWriter:
    """Appends items to an open `.bin` handle; `index()` is the matching `.idx`."""

    def __init__(self, data: BinaryIO, dtype: np.dtype) -> None:
        self._data = data
        self.dtype = np.dtype(dtype)
        self._sizes: list[np.ndarray] = []

    def add_batch(self, flat: np.ndarray, lengths: np.ndarray) -> None:
        """Append `len(lengths)` items whose ids are `flat`, concatenated."""
        self._data.write(flat.astype(self.dtype, copy=False).tobytes())
        self._sizes.append(lengths.astype(np.int32))

    @property
    def items(self) -> int:
        return sum(s.size for s in self._sizes)

    def index(self) -> bytes:
        sizes = np.concatenate(self._sizes) if self._sizes else np.zeros(0, np.int32)
        return index_bytes(sizes, self.dtype)


def index_bytes(sizes: Sequence[int] | np.ndarray, dtype: np.dtype) -> bytes:
    """The `.idx` fairseq writes for items of these sizes and dtype."""
    sizes = np.asarray(sizes, dtype=np.int32)
    pointers = np.zeros(sizes.size, dtype=np.int64)
    np.cumsum(sizes[:-1].astype(np.int64) * np.dtype(dtype).itemsize, out=pointers[1:])
    header = _HEADER.pack(MAGIC, VERSION, DTYPE_CODES[np.dtype(dtype)], sizes.size)
    return header + sizes.tobytes() + pointers.tobytes()


class MMapDataset:
    """A read-only `.bin/.idx` pair: `ds[i]` is item i's ids (a view, no copy)."""

    def __init__(self, idx_path: str, bin_path: str) -> None:
        index = np.memmap(idx_path, mode="r", dtype=np.uint8)
        if index.size < _HEADER.size:
            raise ManifestError(f"{idx_path} is too short for a fairseq index")
        magic, version, code, count = _HEADER.unpack(index[: _HEADER.size].tobytes())
        if magic != MAGIC or version != VERSION or code not in _CODE_DTYPES:
            raise ManifestError(f"{idx_path} is not a fairseq MMIDIDX version 1 index")
        if index.size != _HEADER.size + count * 12:
            raise ManifestError(f"{idx_path} has {index.size} bytes, {count} items need more")
        self.dtype = _CODE_DTYPES[code]
        self.sizes = np.frombuffer(index, np.int32, count, _HEADER.size)
        pointers = np.frombuffer(index, np.int64, count, _HEADER.size + 4 * count)
        self._starts = pointers // self.dtype.itemsize
        tokens = int(self.sizes.astype(np.int64).sum())
        data_bytes = _file_size(bin_path)
        if data_bytes != tokens * self.dtype.itemsize or (
            count and (self._starts[-1] + self.sizes[-1] != tokens)
        ):
            raise ManifestError(f"{bin_path} does not hold the {count} items its index lists")
        # numpy cannot map an empty file; an empty .bin has nothing to map. Items are
        # sliced from a plain ndarray over the map: slicing np.memmap itself is slower.
        self._data = (
            np.frombuffer(np.memmap(bin_path, mode="r"), dtype=self.dtype)
            if data_bytes
            else np.zeros(0, self.dtype)
        )

    def __len__(self) -> int:
        return self.sizes.size

    def __getitem__(self, i: int) -> np.ndarray:
        start = self._starts[i]
        return self._data[start : start + self.sizes[i]]

    def head(self, n: int) -> np.ndarray:
        """The ids of items 0..n-1, concatenated: one slice where they lie back to back,
        as fairseq writes them."""
        if n <= 0:
            return self._data[:0]
        starts = self._starts[:n]
        if np.array_equal(np.diff(starts), self.sizes[: n - 1]):  # each where the last ended
            return self._data[starts[0] : starts[-1] + self.sizes[n - 1]]
        return np.concatenate([self[i] for i in range(n)])


def _file_size(path: str) -> int:
    with open(path, "rb") as f:
        return f.seek(0, 2)
