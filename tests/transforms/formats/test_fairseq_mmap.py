"""fairseq's `.bin/.idx`: byte-identical to fairseq's own builder, read back, checked."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest

from nmtpipe.transforms.errors import ManifestError
from nmtpipe.transforms.formats.fairseq_mmap import MMapDataset, MMapWriter, index_bytes
from nmtpipe.transforms.vocab.vocabulary import fairseq_dtype
from tests.helpers import DATA

GOLDEN = DATA / "golden"
# (golden name, dictionary size fairseq's builder was given)
CASES = [("u16", 8368), ("u32", 70000)]


def items_of(name: str) -> list[list[int]]:
    return json.loads((GOLDEN / f"fairseq-mmap-items.{name}.json").read_text())


def write(items: list[list[int]], dtype: np.dtype, batch: int = 7) -> tuple[bytes, bytes]:
    """Our writer, fed in batches of `batch` items."""
    data = io.BytesIO()
    writer = MMapWriter(data, dtype)
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        flat = np.array([i for item in chunk for i in item], dtype=np.int64)
        writer.add_batch(flat, np.array([len(item) for item in chunk], dtype=np.int64))
    assert writer.items == len(items)
    return data.getvalue(), writer.index()


@pytest.mark.parametrize(("name", "dictionary"), CASES)
def test_our_files_equal_fairseqs_builder(name, dictionary):
    dtype = fairseq_dtype(dictionary)  # fairseq's make_builder(vocab_size=len(dict))
    data, index = write(items_of(name), dtype)
    assert data == (GOLDEN / f"fairseq-mmap.{name}.bin").read_bytes()
    assert index == (GOLDEN / f"fairseq-mmap.{name}.idx").read_bytes()


@pytest.mark.parametrize(("name", "dictionary"), CASES)
def test_we_read_fairseqs_files(name, dictionary):
    ds = MMapDataset(
        str(GOLDEN / f"fairseq-mmap.{name}.idx"), str(GOLDEN / f"fairseq-mmap.{name}.bin")
    )
    items = items_of(name)
    assert ds.dtype == fairseq_dtype(dictionary) and len(ds) == len(items)
    assert ds.sizes.tolist() == [len(item) for item in items]
    assert all(ds[i].tolist() == item for i, item in enumerate(items))
    assert ds[-1].tolist() == items[-1]


def test_dtype_follows_fairseq():
    assert fairseq_dtype(65499) == np.uint16 and fairseq_dtype(65500) == np.uint32
    assert fairseq_dtype(2**32) == np.int64


def test_empty_dataset(tmp_path):
    (tmp_path / "e.bin").write_bytes(b"")
    (tmp_path / "e.idx").write_bytes(index_bytes([], np.uint16))
    ds = MMapDataset(str(tmp_path / "e.idx"), str(tmp_path / "e.bin"))
    assert len(ds) == 0 and ds.sizes.size == 0


def copy_golden(tmp_path, name="u16") -> tuple[str, str]:
    idx, data = tmp_path / "g.idx", tmp_path / "g.bin"
    shutil.copy(GOLDEN / f"fairseq-mmap.{name}.idx", idx)
    shutil.copy(GOLDEN / f"fairseq-mmap.{name}.bin", data)
    return str(idx), str(data)


def test_damaged_files_are_refused(tmp_path):
    idx, data = copy_golden(tmp_path)
    with open(data, "r+b") as f:
        f.truncate(100)
    with pytest.raises(ManifestError, match=r"g\.bin does not hold the 300 items"):
        MMapDataset(idx, data)
    idx, data = copy_golden(tmp_path)
    with open(idx, "r+b") as f:
        f.write(b"NOTIDX!")
    with pytest.raises(ManifestError, match=r"g\.idx is not a fairseq MMIDIDX"):
        MMapDataset(idx, data)
    idx, data = copy_golden(tmp_path)
    with open(idx, "r+b") as f:
        f.truncate(1000)
    with pytest.raises(ManifestError, match=r"g\.idx has 1000 bytes"):
        MMapDataset(idx, data)
