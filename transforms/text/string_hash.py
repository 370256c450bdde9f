"""64-bit hashes of Arrow strings, computed over the UTF-8 buffer without a Python
string per row (pyarrow has no public string hash).

A polynomial over the bytes, mod 2**64, then a splitmix64 finaliser: stable across
processes and versions (unlike Python's salted `hash()`), so hashes can be stored and
compared later. Not collision-proof: a caller that must be exact treats equal hashes as
candidates and compares the strings.
"""

from __future__ import annotations

import functools

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
        return mix64(h)


def _powers(length: int) -> np.ndarray:
    """BASE**k mod 2**64 for k < length."""
    out = np.full(max(length, 1), _BASE, dtype=np.uint64)
    out[0] = 1
    with np.errstate(over="ignore"):
        return np.multiply.accumulate(out)


def mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place on uint64: every input bit reaches every output
    bit."""
    with np.errstate(over="ignore"):
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def crc32(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """`zlib.crc32` of each string's UTF-8 bytes, as uint32: the buckets of files
    written before this function existed stay where they were."""
    if isinstance(strings, pa.ChunkedArray):
        chunks = [_crc32_chunk(c) for c in strings.chunks]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint32)
    return _crc32_chunk(strings)


def _crc32_chunk(strings: pa.Array) -> np.ndarray:
    """Byte position by byte position over all strings at once, longest strings first,
    so that the strings still going at each position are a prefix of the order."""
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        raise TypeError(f"crc32 takes strings, not {strings.type}")
    if strings.null_count:
        strings = pc.fill_null(strings, "")
    n = len(strings)
    width = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    _, offsets_buf, data_buf = strings.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=width)[strings.offset : strings.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buf or b"", dtype=np.uint8)
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")
    starts = offsets[:-1][order]
    # how many strings are longer than each byte position
    going = np.searchsorted(-lengths[order], -np.arange(int(lengths.max(initial=0))), "left")
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    table = _crc_table()
    for position, k in enumerate(going.tolist()):
        live = crc[:k]
        index = (live ^ data[starts[:k] + position]) & 0xFF
        crc[:k] = table[index] ^ (live >> 8)
    out = np.empty(n, dtype=np.uint32)
    out[order] = crc ^ np.uint32(0xFFFFFFFF)
    return out


@functools.cache
def _crc_table() -> np.ndarray:
    """The byte-wise table of CRC-32's reflected polynomial 0xEDB88320 (zlib's)."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
    return table.astype(np.uint32)
