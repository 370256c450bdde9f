"""Manifests: what readers trust, and what they refuse."""

from __future__ import annotations

import json

import pytest

from nmtpipe.transforms.errors import ManifestError
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
    with pytest.raises(ManifestError, match=r"a\.bin does not match its sha256"):
        manifest.verify_files(root, doc, checksums=True)
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
