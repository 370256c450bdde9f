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
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, TypeVar

import pyarrow as pa

from nmtpipe.transforms.errors import ConfigError, InputError, IntegrityError, ManifestError
from nmtpipe.transforms.storage import fsio

MANIFEST = "manifest.json"
STATS_FILE = "stats.json"  # statistics beside a prepare or encode output's data
FORMAT_VERSION = 1
FileEntry = dict[str, Any]
T = TypeVar("T")


def created_stamp() -> str:
    """When an output is made, as its manifest records it ("created") and a report says:
    now, in UTC, to the second (ISO 8601)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        raise OtherKindError(f"{url} is a {found!r} manifest, expected {kind!r}", str(found))
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


class OtherKindError(ManifestError):
    """A manifest of another kind of output than its reader wants."""

    def __init__(self, message: str, found: str = "") -> None:
        super().__init__(message)
        self.found = found


# Each kind of committed output in a user's words.
KINDS = {
    "nmtpipe.prepare": "a prepare output (a prepared dataset)",
    "nmtpipe.vocab": "a vocab output (a vocabulary)",
    "nmtpipe.encode": "an encode output (an encoded dataset)",
    "nmtpipe.export": "an export (a model for Transformers or CTranslate2)",
    "nmtpipe.version": "a refresh version",
}


def open_committed(
    url: str, kind: str, step: str, checksums: bool = False, option: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The root and checked manifest of the committed output of `nmtpipe {step}` at
    `url`; an InputError saying which step to run if there is none. Given the `option`
    that named `url`, a file or another step's output there is a usage error saying
    what the option wants."""
    root = fsio.canonical_url(url)
    named = f"{option} {root}" if option else root
    wants = f"{option or 'it'} wants {KINDS.get(kind, kind)}, the folder nmtpipe {step} writes"
    try:
        doc = read_manifest(root, kind)
    except NotADirectoryError:
        raise ConfigError(f"{named} is a file, not a folder: {wants}") from None
    except OtherKindError as e:
        if option is None:
            raise
        found = KINDS.get(e.found, f"a {e.found!r} output")
        raise ConfigError(f"{named} is {found}: {wants}") from None
    if doc is None:
        raise InputError(
            f"{named} holds no committed {step} output (no manifest.json); run nmtpipe {step} first"
        )
    verify_files(root, doc, checksums)
    return root, doc


def file_url(root: str, entry: Mapping[str, Any]) -> str:
    return _check_path(root, entry["path"])


def verify_files(root: str, doc: Mapping[str, Any], checksums: bool = False) -> None:
    """Raise ManifestError unless every listed file exists with its size (and sha256)."""
    for entry in doc["files"]:
        verify_file(file_url(root, entry), entry, manifest_url(root), checksums, rebuild=root)


def rebuild_hint(root: str) -> str:
    """How a user rebuilds the committed output at `root`, from the kind its manifest
    names (`nmtpipe.prepare` → `nmtpipe prepare`); a refresh part is rebuilt by refresh."""
    if "/parts/" in root or "/vocabs/" in root:
        return f"delete {root} and run nmtpipe refresh again, which rebuilds it"
    try:
        kind = json.loads(fsio.read_bytes(manifest_url(root))).get("kind", "")
    except (OSError, ValueError):
        kind = ""
    step = kind.removeprefix("nmtpipe.") if kind.startswith("nmtpipe.") else "STEP"
    return f"rebuild it: nmtpipe {step} ... --output {root} --force"


def corrupted(name: str, expected: str, actual: str, rebuild: str) -> IntegrityError:
    """The one-line error for a file whose bytes are not the ones committed."""
    return IntegrityError(
        f"{name} is corrupted: its sha256 is {actual}, its manifest says {expected}; "
        f"{rebuild_hint(rebuild)}"
    )


def verify_file(
    url: str,
    entry: Mapping[str, Any],
    listed_in: str,
    checksum: bool,
    name: str | None = None,
    rebuild: str | None = None,
) -> None:
    """Raise ManifestError unless `url` has the size (and sha256) its entry records;
    the error calls the file `name` (default: `url`), e.g. a remote file's local copy,
    and says how to rebuild the output at `rebuild` (default: the manifest's folder)."""
    name = name or url
    rebuild = rebuild or posixpath.dirname(listed_in)
    try:
        size = fsio.size(url)
    except FileNotFoundError:
        raise ManifestError(
            f"{name} is listed in {listed_in} but missing; {rebuild_hint(rebuild)}"
        ) from None
    if size != entry["size"]:
        raise ManifestError(
            f"{name} has {size} bytes, the manifest says {entry['size']} (truncated or "
            f"replaced); {rebuild_hint(rebuild)}"
        )
    if checksum:
        actual = fsio.sha256_of(url)
        if actual != entry["sha256"]:
            raise corrupted(name, entry["sha256"], actual, rebuild)


def entry_of(root: str, doc: Mapping[str, Any], url: str) -> Mapping[str, Any]:
    """The manifest entry of the file `url` of the committed output at `root`."""
    rel = fsio.relative_to(root, url)
    for entry in doc["files"]:
        if entry["path"] == rel:
            return entry
    raise ManifestError(f"{manifest_url(root)} does not list {rel}")


def read_entry(root: str, entry: Mapping[str, Any]) -> bytes:
    """The bytes of a listed file, checked against its size and sha256 while they are
    read (no second pass); an IntegrityError naming the file if they differ."""
    url = file_url(root, entry)
    try:
        data, actual = fsio.read_bytes_hashed(url)
    except FileNotFoundError:
        raise ManifestError(
            f"{url} is listed in {manifest_url(root)} but missing; {rebuild_hint(root)}"
        ) from None
    if actual != entry["sha256"] or len(data) != entry["size"]:
        raise corrupted(url, entry["sha256"], actual, root)
    return data


def read_parquet_entry(
    root: str,
    entry: Mapping[str, Any],
    columns: list[str] | None = None,
    row_groups: list[int] | None = None,
) -> pa.Table:
    """A listed Parquet file, or some of its row groups, checked as it is read.

    Read whole, the file's sha256 is checked while its bytes arrive. Some row groups
    only: the pages read are checked against their CRC32s (nmtpipe writes one per
    page), so a reader of part of a file neither reads the rest nor trusts unchecked
    data. Either way a damaged file is an IntegrityError naming it.
    """
    url = file_url(root, entry)
    if row_groups is None:
        parquet = fsio.parquet_file(read_entry(root, entry))
        return _parsed(url, root, entry, lambda: fsio.read_row_groups(parquet, columns, None))
    return _parsed(url, root, entry, lambda: fsio.read_parquet(url, columns, row_groups))


def parquet_row_groups(root: str, entry: Mapping[str, Any]) -> list[int]:
    """The rows of each row group of a listed Parquet file (its footer only: what a
    reader of its row groups plans with; a damaged footer is an IntegrityError)."""
    url = file_url(root, entry)
    return _parsed(url, root, entry, lambda: fsio.parquet_row_groups(url))


def iter_parquet_entry(
    root: str, entry: Mapping[str, Any], columns: list[str]
) -> Iterator[pa.RecordBatch]:
    """The record batches of a whole listed Parquet file, its sha256 checked first (the
    file is read into memory once: count files are small)."""
    url = file_url(root, entry)
    parquet = _parsed(url, root, entry, lambda: fsio.parquet_file(read_entry(root, entry)))
    batches = parquet.iter_batches(columns=columns)
    while True:
        batch = _parsed(url, root, entry, lambda: next(batches, None))
        if batch is None:
            return
        yield batch


def _parsed(url: str, root: str, entry: Mapping[str, Any], parse: Callable[[], T]) -> T:
    """`parse()`, with Arrow's errors about a damaged file (a failed page CRC, a bad
    footer, undecodable pages) turned into one line naming the file."""
    try:
        return parse()
    except (OSError, pa.ArrowException) as e:
        if isinstance(e, FileNotFoundError | PermissionError):
            raise
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise IntegrityError(
            f"{url} is corrupted: {reason} (its manifest says sha256 {entry['sha256']}); "
            f"{rebuild_hint(root)}"
        ) from e
