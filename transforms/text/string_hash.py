"""64-bit hashes of Arrow strings, computed over the UTF-8 buffer without a Python
string per row (pyarrow has no public string hash).

A polynomial over the bytes, mod 2**64, then a splitmix64 finaliser: stable across
processes and versions (unlike Python's salted `hash()`), so hashes can be stored and
compared later. Not collision-proof: a caller that must be exact treats equal hashes as
candidates and compares the strings.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_BASE = np.uint64(0x100000001B3)  # FNV's 64-bit prime, as the polynomial's base
_LENGTH = np.uint64(0x9E3779B97F4A7C15)  # mixes the byte length in


def hash64(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """One uint64 per string; a null hashes as the empty string."""
    if isinstance(strings, pa.ChunkedArray):
        chunks = [_hash_chunk(c) for c in strings.chunks]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)
    return _hash_chunk(strings)


def _hash_chunk(strings: pa.Array) -> np.ndarray:
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        raise TypeError(f"hash64 takes strings, not {strings.type}")
    if strings.null_count:
        strings = pc.fill_null(strings, "")
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    width = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    _, offsets_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=width)[strings.offset : strings.offset + n + 1]
    offsets = offsets.astype(np.int64)
    lengths = np.diff(offsets)
    first = int(offsets[0])
    data = np.frombuffer(data_buf or b"", dtype=np.uint8)
    starts = offsets[:-1] - first
    used = lengths > 0
    # Byte k of its string weighs BASE**k; only the bytes of non-empty strings are read.
    total = int(offsets[-1]) - first
    position = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    weights = _powers(int(lengths.max()))
    with np.errstate(over="ignore"):
        terms = data[first : first + total].astype(np.uint64) * weights[position]
        h = np.zeros(n, dtype=np.uint64)
        if used.any():
            h[used] = np.add.reduceat(terms, starts[used])
        h += lengths.astype(np.uint64) * _LENGTH
        return _finalise(h)


def _powers(length: int) -> np.ndarray:
    """BASE**k mod 2**64 for k < length."""
    out = np.full(max(length, 1), _BASE, dtype=np.uint64)
    out[0] = 1
    with np.errstate(over="ignore"):
        return np.multiply.accumulate(out)


def _finalise(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit reaches every output bit."""
    with np.errstate(over="ignore"):
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h
