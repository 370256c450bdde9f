"""Arrow shards of encoded pairs: zero-copy reads with pyarrow, and HF `datasets` reads them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from nmtpipe.transforms.formats.arrow_shards import ArrowShard, ArrowWriter

LAYOUT = {"layout": {"pad": 0, "eos": 1}}


def pairs(n: int, seed: int = 0) -> list[tuple[int, list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    return [
        (int(rng.integers(0, 2**62)), [*rng.integers(2, 60000, rng.integers(1, 30)).tolist(), 1],
         [*rng.integers(2, 60000, rng.integers(1, 30)).tolist(), 1])
        for _ in range(n)
    ]  # fmt: skip


def write_shard(path, rows, dtype=np.uint16, batch=16) -> None:
    def flat(side):
        return (
            np.array([i for r in side for i in r], dtype=np.int64),
            np.array([len(r) for r in side], dtype=np.int64),
        )

    with open(path, "wb") as f:
        writer = ArrowWriter(f, dtype, LAYOUT)
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            ids = np.array([r[0] for r in chunk], dtype=np.int64)
            writer.add_batch(ids, flat([r[1] for r in chunk]), flat([r[2] for r in chunk]))
        writer.close()


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_round_trip_through_memory_map(tmp_path, dtype):
    rows = pairs(100)
    write_shard(tmp_path / "s.arrow", rows, dtype)
    shard = ArrowShard(str(tmp_path / "s.arrow"))
    assert shard.rows == 100 and len(shard.batches) == 7 and shard.metadata == LAYOUT
    assert np.concatenate([b["id"] for b in shard.batches]).tolist() == [r[0] for r in rows]
    got = []
    for batch in shard.batches:
        offsets, values = batch["src"]
        assert values.dtype == dtype
        got += [values[offsets[j] : offsets[j + 1]].tolist() for j in range(offsets.size - 1)]
    assert got == [r[1] for r in rows]
    table = pa.ipc.open_stream(pa.memory_map(str(tmp_path / "s.arrow"))).read_all()
    assert table.schema.field("tgt").type == pa.list_(pa.from_numpy_dtype(dtype))
    assert table.column("tgt").to_pylist() == [r[2] for r in rows]


def test_hugging_face_datasets_reads_a_shard(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = pairs(50)
    write_shard(tmp_path / "s.arrow", rows)
    ds = datasets.Dataset.from_file(str(tmp_path / "s.arrow"))
    assert ds.num_rows == 50 and ds.features["src"].feature.dtype == "uint16"
    assert ds[7] == {"id": rows[7][0], "src": rows[7][1], "tgt": rows[7][2]}


def test_a_damaged_shard_is_named(tmp_path):
    from nmtpipe.transforms.errors import ManifestError

    write_shard(tmp_path / "s.arrow", pairs(100))
    data = (tmp_path / "s.arrow").read_bytes()
    (tmp_path / "s.arrow").write_bytes(data[: len(data) // 2])
    with pytest.raises(ManifestError, match=r"s\.arrow is not a readable Arrow stream"):
        ArrowShard(str(tmp_path / "s.arrow"))
