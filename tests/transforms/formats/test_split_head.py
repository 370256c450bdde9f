"""`head(n)`: the first pairs' ids read in bulk equal the pairs read one by one, for
every kind of split (fairseq and Arrow shards, a version's parts, its exclusions)."""

from __future__ import annotations

import numpy as np
import pytest

from nmtpipe.transforms.formats import fairseq_mmap
from nmtpipe.transforms.formats.arrow_shards import ArrowShard, ArrowWriter
from nmtpipe.transforms.formats.encoded_dataset import (
    ArrowSplit,
    ConcatSplit,
    FairseqSplit,
    MaskedSplit,
)
from nmtpipe.transforms.formats.fairseq_mmap import MMapDataset, MMapWriter

DTYPE = np.dtype(np.uint16)


def _items(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(1, 9, n)
    return rng.integers(4, 500, int(lengths.sum())), lengths


def _mmap(path, flat: np.ndarray, lengths: np.ndarray) -> MMapDataset:
    with open(f"{path}.bin", "wb") as f:
        writer = MMapWriter(f, DTYPE)
        writer.add_batch(flat, lengths)
    (path.parent / f"{path.name}.idx").write_bytes(writer.index())
    return MMapDataset(f"{path}.idx", f"{path}.bin")


def _fairseq(tmp_path, rng, sizes: list[int], name: str) -> FairseqSplit:
    shards = []
    for k, n in enumerate(sizes):
        shards.append(tuple(_mmap(tmp_path / f"{name}{k}.{s}", *_items(rng, n)) for s in "st"))
    return FairseqSplit(shards)


def _arrow(tmp_path, rng, batches: list[int]) -> ArrowSplit:
    path = tmp_path / "part.arrow"
    with open(path, "wb") as f:
        writer = ArrowWriter(f, DTYPE, {})
        for n in batches:
            writer.add_batch(np.arange(n), _items(rng, n), _items(rng, n))
        writer.close()
    return ArrowSplit([ArrowShard(str(path))])


def _one_by_one(split, n: int) -> tuple[list[int], list[int]]:
    pairs = [split[i] for i in range(min(n, len(split)))]
    return [int(t) for p in pairs for t in p[0]], [int(t) for p in pairs for t in p[1]]


@pytest.fixture
def splits(tmp_path):
    rng = np.random.default_rng(0)
    fairseq = _fairseq(tmp_path, rng, [7, 0, 5], "f")
    arrow = _arrow(tmp_path, rng, [4, 6, 3])
    both = ConcatSplit([fairseq, arrow])
    masked = MaskedSplit(both, np.array([0, 3, 11, 12, 24]))
    return {"fairseq": fairseq, "arrow": arrow, "concat": both, "masked": masked}


@pytest.mark.parametrize("kind", ["fairseq", "arrow", "concat", "masked"])
def test_head_is_the_pairs_one_by_one(splits, kind):
    split = splits[kind]
    for n in (0, 1, 4, 7, 8, 12, len(split) - 1, len(split), len(split) + 5):
        src, tgt = split.head(n)
        assert (src.tolist(), tgt.tolist()) == _one_by_one(split, n), (kind, n)
        assert src.dtype == tgt.dtype == np.int64


def test_an_index_whose_items_are_not_back_to_back_is_read_item_by_item(tmp_path):
    """fairseq's reader takes any pointers; ours too, but for the last item ending the
    file (here the first two items were written in the other order)."""
    items = [np.array([5, 6, 7]), np.array([8]), np.array([9, 10])]
    written = np.concatenate([items[1], items[0], items[2]])
    (tmp_path / "x.bin").write_bytes(written.astype(DTYPE).tobytes())
    sizes = np.array([3, 1, 2], dtype=np.int32)
    pointers = np.array([1, 0, 4], dtype=np.int64) * DTYPE.itemsize
    header = fairseq_mmap._HEADER.pack(
        fairseq_mmap.MAGIC, fairseq_mmap.VERSION, fairseq_mmap.DTYPE_CODES[DTYPE], 3
    )
    (tmp_path / "x.idx").write_bytes(header + sizes.tobytes() + pointers.tobytes())
    ds = MMapDataset(str(tmp_path / "x.idx"), str(tmp_path / "x.bin"))
    assert ds.head(3).tolist() == [5, 6, 7, 8, 9, 10]
    assert ds.head(2).tolist() == [5, 6, 7, 8]
