"""Encoded pairs as Arrow IPC stream files: `id` int64, `src`/`tgt` lists of ids.

The stream format is what Hugging Face `datasets` memory-maps (`Dataset.from_file`),
and `pyarrow.memory_map` reads it without copying. Each encode batch is one record
batch, so a reader touches only the batches it needs. The id layout of the vocabulary
travels in the schema metadata, so a shard explains itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.errors import ManifestError

_METADATA_KEY = b"nmtpipe"


def schema(dtype: np.dtype, metadata: Mapping[str, Any]) -> pa.Schema:
    ids = pa.list_(pa.from_numpy_dtype(dtype))
    return pa.schema(
        [("id", pa.int64()), ("src", ids), ("tgt", ids)],
        metadata={_METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()},
    )


def id_lists(flat: np.ndarray, lengths: np.ndarray, dtype: np.dtype) -> pa.ListArray:
    """An Arrow list array of ids from concatenated ids and per-item lengths."""
    offsets = np.zeros(lengths.size + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat.astype(dtype, copy=False)))


class ArrowWriter:
    """Writes record batches of (id, src, tgt) to an open binary handle."""

    def __init__(self, sink: BinaryIO, dtype: np.dtype, metadata: Mapping[str, Any]) -> None:
        self.dtype = np.dtype(dtype)
        self.schema = schema(self.dtype, metadata)
        self._writer = pa.ipc.new_stream(sink, self.schema)
        self.rows = 0

    def add_batch(
        self,
        ids: np.ndarray,
        src: tuple[np.ndarray, np.ndarray],
        tgt: tuple[np.ndarray, np.ndarray],
    ) -> None:
        columns = [
            pa.array(ids, pa.int64()),
            id_lists(*src, self.dtype),
            id_lists(*tgt, self.dtype),
        ]
        self._writer.write_batch(pa.record_batch(columns, schema=self.schema))
        self.rows += len(ids)

    def close(self) -> None:
        self._writer.close()


class ArrowShard:
    """One memory-mapped shard: ids and both sides as numpy views per record batch."""

    def __init__(self, path: str) -> None:
        try:
            table = pa.ipc.open_stream(pa.memory_map(path)).read_all()
        except (pa.ArrowInvalid, OSError) as e:
            raise ManifestError(f"{path} is not a readable Arrow stream: {e}") from e
        self.metadata = json.loads(table.schema.metadata.get(_METADATA_KEY, b"{}"))
        self.batches = [_columns(b) for b in table.to_batches()]
        self.rows = table.num_rows


def _columns(batch: pa.RecordBatch) -> dict[str, Any]:
    """Zero-copy numpy views of a batch: ids, and (offsets, values) for each side."""
    out: dict[str, Any] = {"id": batch.column(0).to_numpy(zero_copy_only=True)}
    for name in ("src", "tgt"):
        lists = batch.column(name)
        offsets = lists.offsets.to_numpy(zero_copy_only=True)
        out[name] = (offsets, lists.values.to_numpy(zero_copy_only=True))
    return out
