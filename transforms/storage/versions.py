"""Published dataset versions: what `nmtpipe refresh` writes and training reads.

Under a refresh root, `versions/NNNNNN/manifest.json` describes one version: its parts
(one per raw input: the prepared and encoded outputs, as paths under the root), its
vocabulary and what changed since the version before. A version is never rewritten.
`versions/LATEST` names the newest and is written after it, so a reader going through
LATEST never sees a version that is still being made. `versions/.lock` is created only
if absent (O_EXCL on a local disk, If-None-Match on S3), so that one refresh at a time
publishes.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nmtpipe.transforms.errors import InputError, ManifestError, OutputError
from nmtpipe.transforms.storage import fsio, manifest

KIND = "nmtpipe.version"
VERSIONS = "versions"
LATEST = "LATEST"
LOCK = ".lock"
_NUMBER = re.compile(r"^\d{6}$")


def version_url(root: str, number: int) -> str:
    return fsio.join(root, VERSIONS, f"{number:06d}")


def latest_number(root: str) -> int | None:
    """The number LATEST names, or None before the first version."""
    url = fsio.join(root, VERSIONS, LATEST)
    try:
        text = fsio.read_bytes(url).decode().strip()
    except FileNotFoundError:
        return None
    if not _NUMBER.match(text):
        raise ManifestError(f"{url} holds {text[:40]!r}, not a version number")
    return int(text)


def read_version(root: str, number: int) -> dict[str, Any]:
    """A published version's manifest; an error names it if it is gone or damaged."""
    doc = manifest.read_manifest(version_url(root, number), KIND)
    if doc is None:
        raise InputError(f"{version_url(root, number)} is not a published version")
    return doc


def part_url(root: str, rel: str) -> str:
    """A path the version lists, refused if it would leave the refresh root."""
    norm = posixpath.normpath(rel)
    if rel.startswith("/") or "://" in rel or norm == ".." or norm.startswith("../"):
        raise ManifestError(f"a version under {root} lists {rel!r}, outside the refresh root")
    return fsio.join(root, norm)


def locate(url: str) -> tuple[str, int]:
    """The refresh root and version number of `{root}/versions/LATEST`,
    `{root}/versions/NNNNNN` or its `manifest.json`."""
    path = fsio.canonical_url(url).removesuffix("/" + manifest.MANIFEST)
    head, name = path.rsplit("/", 1)
    root, folder = head.rsplit("/", 1)
    if folder != VERSIONS or not (name == LATEST or _NUMBER.match(name)):
        raise InputError(f"{url} is not a dataset version (…/versions/LATEST or …/versions/NNNNNN)")
    number = latest_number(root) if name == LATEST else int(name)
    if number is None:
        raise InputError(f"{url}: nothing has been published under {root} yet")
    return root, number


def is_version(url: str) -> bool:
    return bool(re.search(r"/versions/(LATEST|\d{6})(/manifest\.json)?/?$", url))


def publish(root: str, doc: dict[str, Any]) -> int:
    """Write the next version, then point LATEST at it; returns its number.

    Call it holding the lock: the number is LATEST + 1, and a version folder that
    already has a manifest (a publisher that died between the two writes) is skipped,
    never overwritten.
    """
    number = (latest_number(root) or 0) + 1
    while fsio.exists(manifest.manifest_url(version_url(root, number))):
        number += 1
    manifest.write_manifest(version_url(root, number), {"kind": KIND, "number": number, **doc})
    fsio.write_bytes(fsio.join(root, VERSIONS, LATEST), f"{number:06d}\n".encode())
    return number


def published(root: str) -> list[int]:
    """The numbers of the versions up to LATEST, oldest first."""
    last = latest_number(root)
    if last is None:
        return []
    numbers = set()
    for url in fsio.find(fsio.join(root, VERSIONS)):
        rel = fsio.relative_to(fsio.join(root, VERSIONS), url)
        folder, _, name = rel.partition("/")
        if name == manifest.MANIFEST and _NUMBER.match(folder) and int(folder) <= last:
            numbers.add(int(folder))
    return sorted(numbers)


def referenced(doc: dict[str, Any]) -> set[str]:
    """The folders (and files) under the root a version needs: its parts (and their
    overlap indexes), its vocabulary and its exclusions."""
    needed = {doc["vocab"]["path"]}
    if doc.get("exclusions"):
        needed.add(doc["exclusions"]["path"])
    for part in doc["parts"]:
        needed |= {part["prepared"], part["encoded"]}
        if "overlap_index" in part:  # versions before it have none
            needed.add(part["overlap_index"])
    return needed


def retain(root: str, keep: int, owned: tuple[str, ...]) -> list[str]:
    """Delete all but the `keep` newest versions, then every folder in `owned` (under
    the root) that no kept version needs; returns what was deleted. Readers of a kept
    version lose nothing; `keep` 0 keeps everything."""
    numbers = published(root)
    if keep < 1 or not numbers:
        return []
    dropped = numbers[:-keep]
    needed: set[str] = set()
    for number in numbers[-keep:]:
        needed |= referenced(read_version(root, number))
    removed = []
    for number in dropped:  # the manifest first: a half-deleted version is not one
        fsio.remove(manifest.manifest_url(version_url(root, number)))
        fsio.remove_tree(version_url(root, number))
        removed.append(f"{VERSIONS}/{number:06d}")
    for folder in owned:
        removed += _prune(root, folder, needed)
    return removed


def _prune(root: str, folder: str, needed: set[str]) -> list[str]:
    """Delete what under `folder` no needed path is or contains (a part's encodings for
    retired vocabularies go, the part stays while a version needs it)."""
    removed = []
    for child in _children(fsio.join(root, folder)):
        rel = f"{folder}/{child}"
        if rel in needed:
            continue
        if any(n.startswith(rel + "/") for n in needed):
            removed += _prune(root, rel, needed)
        else:
            fsio.remove_tree(fsio.join(root, rel))
            removed.append(rel)
    return removed


def _children(url: str) -> list[str]:
    fs, path = fsio.url_to_fs(url)
    try:
        return sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False))
    except FileNotFoundError:
        return []


@contextmanager
def lock(root: str, break_lock: bool = False) -> Iterator[dict[str, Any]]:
    """Hold `versions/.lock` while the block runs.

    Another holder is an OutputError naming it (host, pid, since when); a lock left by
    a killed refresh on this machine (its pid is gone) is taken over, one from another
    machine only with `break_lock`.
    """
    url = fsio.join(root, VERSIONS, LOCK)
    me = {"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex}
    me["since"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if not _create(url, me):
        holder = _holder(url)
        if not (break_lock or _is_stale(holder)):
            raise OutputError(
                f"another refresh holds {url} (host {holder.get('host')}, pid "
                f"{holder.get('pid')}, since {holder.get('since')}); wait for it, or if it is "
                "no longer running, re-run with --break-lock"
            )
        fsio.remove(url)
        if not _create(url, me):
            raise OutputError(f"another refresh took {url} at the same moment; try again")
    if _holder(url).get("token") != me["token"]:  # a store that overwrote instead of refusing
        raise OutputError(
            f"{url} was overwritten by another refresh: this store did not honour exclusive "
            "create; install the storage extra's supported versions (pip install 'nmtpipe[s3]')"
        )
    try:
        yield me
    finally:
        if _holder(url).get("token") == me["token"]:
            fsio.remove(url)


def _create(url: str, content: dict[str, Any]) -> bool:
    fs, path = fsio.url_to_fs(url)
    fsio.make_parent(url)
    try:
        with fs.open(path, "xb") as f:
            f.write(json.dumps(content).encode())
    except FileExistsError:
        return False
    return True


def _holder(url: str) -> dict[str, Any]:
    try:
        return json.loads(fsio.read_bytes(url))
    except (FileNotFoundError, ValueError):  # gone, or being written this instant
        return {}


def _is_stale(holder: dict[str, Any]) -> bool:
    """A lock of a process on this machine that no longer runs."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
