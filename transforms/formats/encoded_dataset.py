"""Reading an `encode` output: trust the manifest, map the shards, index pairs in O(1).

`open_dataset(url)` reads `manifest.json`, refuses entries that leave the dataset,
checks every shard of the chosen format against its size and sha256, and memory-maps
it. Remote datasets are first copied into fsspec's whole-file cache, so each worker
downloads a shard once. A split is then a sequence of (src, tgt) id arrays — views into
the mapped files, nothing copied — with `src_sizes`/`tgt_sizes` arrays for batching
that never touch the token data.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Sequence
from typing import Any, Protocol

import fsspec
import numpy as np

from nmtpipe.transforms.errors import ManifestError
from nmtpipe.transforms.formats.arrow_shards import ArrowShard
from nmtpipe.transforms.formats.exclusions import Dropped, kept_index, read_exclusions
from nmtpipe.transforms.formats.fairseq_mmap import MMapDataset, bin_name, idx_name
from nmtpipe.transforms.storage import fsio, manifest, versions
from nmtpipe.transforms.storage.retry import retrying
from nmtpipe.transforms.vocab.id_layout import IdLayout

KIND = "nmtpipe.encode"
ARROW, FAIRSEQ = "arrow", "fairseq"  # the formats an encode output may hold
FORMATS = (ARROW, FAIRSEQ)
VERIFY = ("sha256", "size")


class SplitData(Protocol):
    """What training and decoding need from a split, whatever the format."""

    src_sizes: np.ndarray
    tgt_sizes: np.ndarray

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]: ...

    def head(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the first `n` pairs, each side concatenated (EOS included): what
        `self[i]` gives for each, read in bulk (for samples of many pairs)."""
        ...


class _Locator:
    """Maps a global pair index to (part, index within part) across concatenated parts
    (a bisect over the parts' starts: the cost does not grow with the data)."""

    def __init__(self, lengths: Sequence[int]) -> None:
        self._starts = [0, *itertools.accumulate(int(n) for n in lengths)]

    def __len__(self) -> int:
        return self._starts[-1]

    def locate(self, i: int) -> tuple[int, int]:
        n = self._starts[-1]
        if not -n <= i < n:
            raise IndexError(f"pair {i} of {n}")
        i = i + n if i < 0 else i
        part = bisect.bisect_right(self._starts, i) - 1
        return part, i - self._starts[part]


class FairseqSplit:
    """A split as fairseq's `.bin/.idx` pairs, one per shard (`train`, `train1`, ...)."""

    def __init__(self, shards: list[tuple[MMapDataset, MMapDataset]]) -> None:
        self._shards = shards
        self._where = _Locator([len(src) for src, _ in shards])
        self.src_sizes = _concat([src.sizes for src, _ in shards])
        self.tgt_sizes = _concat([tgt.sizes for _, tgt in shards])

    def __len__(self) -> int:
        return len(self._where)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        shard, j = self._where.locate(i)
        src, tgt = self._shards[shard]
        return src[j], tgt[j]

    def head(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        taken = _taken(n, [len(src) for src, _ in self._shards])
        shards = zip(self._shards, taken, strict=True)
        return _sides([(src.head(k), tgt.head(k)) for (src, tgt), k in shards])


class ArrowSplit:
    """A split as Arrow shards; pairs are found through their record batches."""

    def __init__(self, shards: list[ArrowShard]) -> None:
        self._batches = [batch for shard in shards for batch in shard.batches]
        self._where = _Locator([batch["id"].size for batch in self._batches])
        self.src_sizes = _concat([np.diff(b["src"][0]) for b in self._batches])
        self.tgt_sizes = _concat([np.diff(b["tgt"][0]) for b in self._batches])

    @property
    def ids(self) -> np.ndarray:
        """The prepared pairs' ids, in order (built on request: 8 bytes a pair)."""
        return _concat([b["id"] for b in self._batches], np.int64)

    def __len__(self) -> int:
        return len(self._where)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        b, j = self._where.locate(i)
        batch = self._batches[b]
        return _item(*batch["src"], j), _item(*batch["tgt"], j)

    def head(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        taken = _taken(n, [batch["id"].size for batch in self._batches])
        pairs = [
            tuple(values[offsets[0] : offsets[k]] for offsets, values in (b["src"], b["tgt"]))
            for b, k in zip(self._batches, taken, strict=True)
        ]
        return _sides(pairs)


class ConcatSplit:
    """One split of several datasets, one after the other (a version's parts)."""

    def __init__(self, parts: list[SplitData]) -> None:
        self._parts = parts
        self._where = _Locator([len(part) for part in parts])
        self.src_sizes = _concat([part.src_sizes for part in parts])
        self.tgt_sizes = _concat([part.tgt_sizes for part in parts])

    def __len__(self) -> int:
        return len(self._where)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        part, j = self._where.locate(i)
        return self._parts[part][j]

    def head(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        taken = _taken(n, [len(part) for part in self._parts])
        return _sides([part.head(k) for part, k in zip(self._parts, taken, strict=True)])


class MaskedSplit:
    """A split without some of its rows (a version's exclusions); O(log dropped) a pair."""

    def __init__(self, inner: SplitData, dropped: np.ndarray) -> None:
        self._inner, self._dropped = inner, dropped
        self.src_sizes = np.delete(inner.src_sizes, dropped)
        self.tgt_sizes = np.delete(inner.tgt_sizes, dropped)

    def __len__(self) -> int:
        return len(self._inner) - len(self._dropped)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self._inner[kept_index(len(self._inner), self._dropped, i)]

    def head(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        n = min(n, len(self))
        if n <= 0:
            return self._inner.head(0)
        stop = kept_index(len(self._inner), self._dropped, n - 1) + 1  # inner rows read
        keep = np.ones(stop, dtype=bool)
        keep[self._dropped[self._dropped < stop]] = False
        sizes = (self._inner.src_sizes[:stop], self._inner.tgt_sizes[:stop])
        ids = self._inner.head(stop)
        return ids[0][np.repeat(keep, sizes[0])], ids[1][np.repeat(keep, sizes[1])]


def _taken(n: int, lengths: list[int]) -> list[int]:
    """How many of the first `n` pairs each of consecutive parts of `lengths` holds."""
    taken = []
    for length in lengths:
        taken.append(max(0, min(n, length)))
        n -= taken[-1]
    return taken


def _sides(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """(all sources, all targets) of consecutive parts' `head`s, as int64."""
    return _concat([p[0] for p in pairs], np.int64), _concat([p[1] for p in pairs], np.int64)


def _item(offsets: np.ndarray, values: np.ndarray, j: int) -> np.ndarray:
    return values[offsets[j] : offsets[j + 1]]


def _concat(arrays: list[np.ndarray], dtype: Any = np.int32) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


class EncodedDataset:
    """A committed `encode` output, opened in one format."""

    def __init__(self, root: str, doc: dict[str, Any], fmt: str, splits: dict[str, SplitData]):
        self.root, self.manifest, self.format = root, doc, fmt
        self.languages: dict[str, str] = doc["languages"]
        self.layout = IdLayout(**doc["id_layouts"][fmt])
        self.dtype = np.dtype(doc["dtypes"][fmt])
        self.vocab_sizes: dict[str, int] = doc["vocab_sizes"][fmt]  # ids per language
        self.joined: bool = doc["joined"]  # one vocabulary for both languages
        self.vocab_fingerprint: str = doc["vocab"]["fingerprint"]
        self.data_fingerprint = data_fingerprint(doc)
        self._splits = splits

    @property
    def splits(self) -> list[str]:
        return list(self._splits)

    def __getitem__(self, split: str) -> SplitData:
        if split not in self._splits:
            raise KeyError(f"{self.root} has no split {split!r}; it has {', '.join(self._splits)}")
        return self._splits[split]


class _Files:
    """Local, checked copies of the manifest's files: in place, or through the cache."""

    def __init__(self, root: str, doc: dict[str, Any], cache_dir: str | None, verify: str):
        self.root, self.verify = root, verify
        self.entries = {f["path"]: f for f in doc["files"]}
        self._cache = None
        if not fsio.is_local(root):
            fs, _ = fsio.url_to_fs(root)
            self._cache = fsspec.filesystem(
                "filecache", fs=fs, cache_storage=cache_dir or _default_cache(), same_names=False
            )

    def local(self, rel: str) -> str:
        """The local path of the listed file `rel`, verified against its entry."""
        entry = self.entries.get(rel)
        if entry is None:
            raise ManifestError(f"{manifest.manifest_url(self.root)} does not list {rel}")
        url = manifest.file_url(self.root, entry)
        if self._cache is None:
            manifest.verify_file(url, entry, manifest.manifest_url(self.root), self._checksum)
            return fsio.url_to_fs(url)[1]
        path = fsio.url_to_fs(url)[1]
        listed_in = manifest.manifest_url(self.root)
        local = self._fetch(path, url)
        try:
            manifest.verify_file(local, entry, listed_in, self._checksum, name=url)
        except ManifestError:  # perhaps a stale cached copy: fetch it again, once
            self._cache.pop_from_cache(path)
            local = self._fetch(path, url)
            manifest.verify_file(local, entry, listed_in, self._checksum, name=url)
        return local

    @property
    def _checksum(self) -> bool:
        return self.verify == "sha256"

    def _fetch(self, path: str, url: str) -> str:
        def fetch() -> str:
            with self._cache.open(path, "rb") as f:
                return f.name

        try:
            return retrying(fetch, f"read {url}")
        except FileNotFoundError:
            raise ManifestError(
                f"{url} is listed in {manifest.manifest_url(self.root)} but missing"
            ) from None


def _default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nmtpipe", "shards")


def _open_fairseq(files: _Files, info: dict[str, Any], langs: dict[str, str]) -> FairseqSplit:
    shards = []
    for prefix in info["fairseq"]:
        pair = []
        for lang in (langs["src"], langs["tgt"]):
            side = f"{prefix}.{lang}"
            pair.append(MMapDataset(files.local(idx_name(side)), files.local(bin_name(side))))
        if len(pair[0]) != len(pair[1]):
            raise ManifestError(f"{files.root}/{prefix}: the two languages differ in length")
        shards.append((pair[0], pair[1]))
    return FairseqSplit(shards)


def open_dataset(
    url: str, fmt: str | None = None, cache_dir: str | None = None, verify: str = "sha256"
) -> EncodedDataset:
    """The committed encode output at `url` (a folder or its `manifest.json`), or a
    version `nmtpipe refresh` published (`{root}/versions/LATEST` or `.../NNNNNN`).

    `fmt` picks `arrow` or `fairseq` (default: the first the manifest lists); remote
    shards are cached under `cache_dir` (default `~/.cache/nmtpipe/shards`); `verify`
    is `sha256` (every byte checked once per open) or `size` (sizes and structure only).
    """
    if verify not in VERIFY:
        raise ValueError(f"verify must be one of {VERIFY}")
    if versions.is_version(url):
        return _open_version(url, fmt, cache_dir, verify)
    root = fsio.canonical_url(url.removesuffix("/" + manifest.MANIFEST))
    root, doc = manifest.open_committed(root, KIND, "encode")
    fmt = fmt or doc["formats"][0]
    if fmt not in doc["formats"]:
        raise ManifestError(f"{root} has no {fmt} shards; it has {', '.join(doc['formats'])}")
    files = _Files(root, doc, cache_dir, verify)
    langs = doc["languages"]
    splits: dict[str, SplitData] = {}
    for split, info in doc["splits"].items():
        if fmt == FAIRSEQ:
            splits[split] = _open_fairseq(files, info, langs)
        else:
            splits[split] = ArrowSplit([ArrowShard(files.local(p)) for p in info["arrow"]])
        if len(splits[split]) != info["pairs"]:
            raise ManifestError(
                f"{root}: the {split} shards hold {len(splits[split])} pairs, "
                f"the manifest says {info['pairs']}"
            )
    return EncodedDataset(root, doc, fmt, splits)


def data_fingerprint(doc: dict[str, Any]) -> str:
    """What identifies the data of an encode output's or a version's manifest (what
    training resumes must match): the encode output's fingerprint, or its parts'."""
    return doc.get("data_fingerprint", doc["fingerprint"])


def committed_doc(url: str) -> dict[str, Any]:
    """The manifest of the encode output or version at `url`, its files unopened (what
    decoding raw text needs: languages, id layouts, the vocabulary)."""
    if versions.is_version(url):
        return _version_manifest(url)[0]
    return manifest.open_committed(url, KIND, "encode")[1]


def _exclusions(root: str, doc: dict[str, Any]) -> Dropped:
    """The rows a version leaves out of its parts (none for versions made before
    exclusions existed), its file checked against the version's record."""
    info = doc.get("exclusions")
    if not info:
        return {}
    url = versions.part_url(root, info["path"])
    manifest.verify_file(
        url, info, manifest.manifest_url(versions.version_url(root, doc["number"])), True
    )
    return read_exclusions(url)


def _version_manifest(url: str) -> tuple[dict[str, Any], list[str], list[dict[str, np.ndarray]]]:
    """A published version's merged manifest, the URLs of its parts' encode outputs and,
    per part, the rows of each split the version leaves out.

    The merged manifest is the first part's, with the version's splits (pairs summed
    over the parts, in order, less the exclusions) and the list of the parts' prepared
    outputs (where decoding finds the texts of a split, with `excluded` rows per split).
    Every part must share the vocabulary.
    """
    root, number = versions.locate(url)
    doc = versions.read_version(root, number)
    parts = [versions.part_url(root, p["encoded"]) for p in doc["parts"]]
    if not parts:
        raise ManifestError(f"{versions.version_url(root, number)} has no parts")
    docs = [manifest.read_manifest(part, KIND) for part in parts]  # files: checked on open
    for part, encoded in zip(parts, docs, strict=True):
        if encoded is None:
            raise ManifestError(f"{part}, a part of {url}, has no manifest (deleted?)")
    for part, encoded in zip(parts[1:], docs[1:], strict=True):
        if encoded["vocab"]["fingerprint"] != docs[0]["vocab"]["fingerprint"]:
            raise ManifestError(f"{part} was encoded with another vocabulary than {parts[0]}")
    excluded = _exclusions(root, doc)
    dropped = [
        {split: rows for (key, split), rows in excluded.items() if key == p["key"]}
        for p in doc["parts"]
    ]
    splits = {
        name: {
            "pairs": sum(
                d["splits"][name]["pairs"] - len(drop.get(name, ()))
                for d, drop in zip(docs, dropped, strict=True)
                if name in d["splits"]
            )
        }
        for name in ("train", "valid", "test")
        if any(name in d["splits"] for d in docs)
    }
    prepared_info = [
        {**d["prepared"], "excluded": {s: rows.tolist() for s, rows in drop.items()}}
        for d, drop in zip(docs, dropped, strict=True)
    ]
    merged = {
        **docs[0],
        "version": {"root": root, "number": number},
        "prepared": prepared_info,
        "splits": splits,
        "data_fingerprint": manifest.fingerprint([d["fingerprint"] for d in docs]),
    }
    return merged, parts, dropped


def _open_version(url: str, fmt: str | None, cache_dir: str | None, verify: str) -> EncodedDataset:
    """A published version: its parts' encoded outputs, split by split, in order, less
    the rows the version excludes."""
    merged, urls, dropped = _version_manifest(url)
    parts = [open_dataset(part, fmt, cache_dir, verify) for part in urls]
    if any(part.format != parts[0].format for part in parts):
        raise ManifestError(f"the parts of {url} do not all have {parts[0].format} shards")

    def split_of(part: EncodedDataset, drop: dict[str, np.ndarray], name: str) -> SplitData:
        rows = drop.get(name)
        return part[name] if rows is None or not len(rows) else MaskedSplit(part[name], rows)

    splits: dict[str, SplitData] = {
        name: ConcatSplit(
            [split_of(p, d, name) for p, d in zip(parts, dropped, strict=True) if name in p.splits]
        )
        for name in merged["splits"]
    }
    version = merged["version"]
    return EncodedDataset(
        versions.version_url(version["root"], version["number"]), merged, parts[0].format, splits
    )
