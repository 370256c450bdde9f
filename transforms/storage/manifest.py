"""`manifest.json`: the commit record of a step's output, and the only thing readers trust.

A step writes its files first and its manifest last. The manifest lists every file with
its size and sha256, the configuration, the identities of the inputs and the code
version, and a fingerprint of all that. A directory without a manifest holds no result;
a manifest whose files disagree with it is an error, never a silent partial read.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping
from typing import Any

from nmtpipe.transforms.errors import InputError, ManifestError
from nmtpipe.transforms.storage import fsio

MANIFEST = "manifest.json"
STATS_FILE = "stats.json"  # statistics beside a prepare or encode output's data
FORMAT_VERSION = 1
FileEntry = dict[str, Any]


def canonical_json(obj: Any) -> bytes:
    """JSON with sorted keys and no whitespace: equal objects give equal bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj`."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def file_entry(
    root: str, written: fsio.WrittenFile, kind: str, rows: int, **extra: Any
) -> FileEntry:
    """The manifest's record of a file written under `root`."""
    return {
        "path": fsio.relative_to(root, written.url),
        "kind": kind,
        "size": written.size,
        "sha256": written.sha256,
        "rows": rows,
        **extra,
    }


def manifest_url(root: str) -> str:
    return fsio.join(root, MANIFEST)


def _check_path(root: str, rel: str) -> str:
    """The URL of a manifest entry, refusing entries that would leave the dataset root."""
    norm = posixpath.normpath(rel)
    if rel.startswith("/") or "://" in rel or norm == ".." or norm.startswith("../") or "\\" in rel:
        raise ManifestError(f"{manifest_url(root)} lists {rel!r}, which is outside the dataset")
    return fsio.join(root, norm)


def write_manifest(root: str, doc: Mapping[str, Any]) -> fsio.WrittenFile:
    """Commit `root` by writing its manifest (atomically, and last)."""
    body = json.dumps({"format_version": FORMAT_VERSION, **doc}, indent=2, sort_keys=True)
    return fsio.write_bytes(manifest_url(root), body.encode() + b"\n")


def read_manifest(root: str, kind: str) -> dict[str, Any] | None:
    """The manifest at `root` if there is one, checked for shape; None if uncommitted."""
    url = manifest_url(root)
    try:
        raw = fsio.read_bytes(url)
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise ManifestError(f"{url} is not valid JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        found = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise ManifestError(f"{url} is a {found!r} manifest, expected {kind!r}")
    if doc.get("format_version") != FORMAT_VERSION:
        raise ManifestError(
            f"{url} has format version {doc.get('format_version')}, this nmtpipe reads "
            f"{FORMAT_VERSION}"
        )
    files = doc.get("files")
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and {"path", "size", "sha256"} <= f.keys() for f in files
    ):
        raise ManifestError(f"{url} has no valid file list")
    for f in files:
        _check_path(root, f["path"])
    return doc


def open_committed(
    url: str, kind: str, step: str, checksums: bool = False
) -> tuple[str, dict[str, Any]]:
    """The root and checked manifest of the committed output of `nmtpipe {step}` at
    `url`; an InputError saying which step to run if there is none."""
    root = fsio.canonical_url(url)
    doc = read_manifest(root, kind)
    if doc is None:
        raise InputError(
            f"{root} holds no committed {step} output (no manifest.json); run nmtpipe {step} first"
        )
    verify_files(root, doc, checksums)
    return root, doc


def file_url(root: str, entry: Mapping[str, Any]) -> str:
    return _check_path(root, entry["path"])


def verify_files(root: str, doc: Mapping[str, Any], checksums: bool = False) -> None:
    """Raise ManifestError unless every listed file exists with its size (and sha256)."""
    for entry in doc["files"]:
        verify_file(file_url(root, entry), entry, manifest_url(root), checksums)


def verify_file(
    url: str, entry: Mapping[str, Any], listed_in: str, checksum: bool, name: str | None = None
) -> None:
    """Raise ManifestError unless `url` has the size (and sha256) its entry records;
    the error calls the file `name` (default: `url`), e.g. a remote file's local copy."""
    name = name or url
    try:
        size = fsio.size(url)
    except FileNotFoundError:
        raise ManifestError(f"{name} is listed in {listed_in} but missing") from None
    if size != entry["size"]:
        raise ManifestError(
            f"{name} has {size} bytes, the manifest says {entry['size']} (truncated or replaced)"
        )
    if checksum and fsio.sha256_of(url) != entry["sha256"]:
        raise ManifestError(f"{name} does not match its sha256 in the manifest (corrupted)")
