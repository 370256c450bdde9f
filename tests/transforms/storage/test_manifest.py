"""Manifests: what readers trust, and what they refuse."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest

from nmtpipe.transforms.errors import IntegrityError, ManifestError
from nmtpipe.transforms.storage import fsio, manifest


def committed(tmp_path, **extra):
    root = str(tmp_path)
    written = fsio.write_bytes(f"{root}/data/a.bin", b"payload")
    doc = {
        "kind": "nmtpipe.test",
        "files": [{"path": "data/a.bin", "size": written.size, "sha256": written.sha256}],
        **extra,
    }
    manifest.write_manifest(root, doc)
    return root


def test_round_trip_and_verification(tmp_path):
    root = committed(tmp_path)
    doc = manifest.read_manifest(root, "nmtpipe.test")
    manifest.verify_files(root, doc, checksums=True)
    assert manifest.read_manifest(str(tmp_path / "elsewhere"), "nmtpipe.test") is None


def test_truncated_and_corrupted_files_are_named(tmp_path):
    root = committed(tmp_path)
    doc = manifest.read_manifest(root, "nmtpipe.test")
    (tmp_path / "data" / "a.bin").write_bytes(b"payloaX")
    expected = doc["files"][0]["sha256"]
    with pytest.raises(IntegrityError, match=rf"a\.bin is corrupted: .* says {expected}"):
        manifest.verify_files(root, doc, checksums=True)
    with pytest.raises(
        IntegrityError, match=r"rebuild it: nmtpipe test \.\.\. --output .* --force"
    ):
        manifest.read_entry(root, doc["files"][0])
    (tmp_path / "data" / "a.bin").write_bytes(b"pay")
    with pytest.raises(ManifestError, match=r"a\.bin has 3 bytes, the manifest says 7"):
        manifest.verify_files(root, doc)
    (tmp_path / "data" / "a.bin").unlink()
    with pytest.raises(ManifestError, match=r"a\.bin is listed .* but missing"):
        manifest.verify_files(root, doc)


@pytest.mark.parametrize("path", ["../outside.bin", "/etc/passwd", "s3://b/x", "a/../../x"])
def test_entries_outside_the_root_are_refused(tmp_path, path):
    root = committed(tmp_path)
    doc = json.loads((tmp_path / "manifest.json").read_text())
    doc["files"].append({"path": path, "size": 1, "sha256": "0" * 64})
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match="outside the dataset"):
        manifest.read_manifest(root, "nmtpipe.test")


def test_wrong_kind_version_and_garbage(tmp_path):
    root = committed(tmp_path)
    with pytest.raises(ManifestError, match=r"expected 'nmtpipe\.other'"):
        manifest.read_manifest(root, "nmtpipe.other")
    doc = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**doc, "format_version": 99}))
    with pytest.raises(ManifestError, match="format version 99"):
        manifest.read_manifest(root, "nmtpipe.test")
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        manifest.read_manifest(root, "nmtpipe.test")


def test_fingerprint_is_canonical():
    assert manifest.fingerprint({"a": 1, "b": [1, 2]}) == manifest.fingerprint(
        {"b": [1, 2], "a": 1}
    )
    assert manifest.fingerprint({"a": 1}) != manifest.fingerprint({"a": 2})


def test_a_listed_file_is_checked_while_it_is_read(tmp_path):
    root = committed(tmp_path)
    entry = manifest.read_manifest(root, "nmtpipe.test")["files"][0]
    assert manifest.read_entry(root, entry) == b"payload"
    assert hashlib.sha256(b"payload").hexdigest() == entry["sha256"]


def _parquet(tmp_path, rows: int = 3000):
    root = str(tmp_path)
    table = pa.table({"id": list(range(rows)), "text": [f"sentence {i}" for i in range(rows)]})
    written = fsio.write_parquet(f"{root}/pairs.parquet", table, row_group_size=1000)
    return root, manifest.file_entry(root, written, "pairs", rows), table


def _flip(path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x20
    path.write_bytes(bytes(data))


def test_parquet_read_whole_or_by_row_group_is_checked(tmp_path):
    root, entry, table = _parquet(tmp_path)
    assert manifest.read_parquet_entry(root, entry).equals(table)
    assert manifest.read_parquet_entry(root, entry, ["id"], [1])["id"].to_pylist() == list(
        range(1000, 2000)
    )
    batches = list(manifest.iter_parquet_entry(root, entry, ["text"]))
    assert sum(b.num_rows for b in batches) == 3000
    # A flipped byte in the middle row group's pages: the whole-file read fails on the
    # sha256, the read of that row group on its page CRC, each naming the file.
    path = tmp_path / "pairs.parquet"
    meta = fsio.parquet_file(path.read_bytes()).metadata.row_group(1).column(1)
    _flip(path, meta.data_page_offset + meta.total_compressed_size // 2)
    with pytest.raises(IntegrityError, match=r"pairs\.parquet is corrupted: its sha256 is"):
        manifest.read_parquet_entry(root, entry)
    with pytest.raises(IntegrityError, match=r"pairs\.parquet is corrupted: .*CRC"):
        manifest.read_parquet_entry(root, entry, ["text"], [1])
    with pytest.raises(IntegrityError, match=r"pairs\.parquet is corrupted"):
        list(manifest.iter_parquet_entry(root, entry, ["text"]))
    # Row groups it does not read are not its concern: they are still readable.
    assert manifest.read_parquet_entry(root, entry, ["text"], [0]).num_rows == 1000
