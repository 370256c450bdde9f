"""Turn the user's input arguments into the list of things to read.

fairseq names a parallel corpus by a prefix (`train` for `train.en` + `train.zh`); T2T's
datasets come as members of `.tgz` archives; Tatoeba-style data comes as TSV. All three
resolve here, on the driver, into `CorpusInput`s, so that a missing file is reported
before any pipeline starts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.storage import fsio

COMPRESSION_SUFFIXES = ("", ".gz", ".bz2", ".xz", ".zst")
TAR_PREFIX = "tar://"
ROLES = ("train", "valid", "test")


@dataclass(frozen=True)
class CorpusInput:
    """One unit of reading: a pair of line-aligned files, or one TSV file.

    `role` is the split the pairs go to; `train` input is also where valid and test
    pairs are carved from when those splits have no input of their own.
    """

    role: str
    src: str
    tgt: str | None = None
    columns: tuple[int, int] = (0, 1)
    relative: bool = False  # the user named it by a relative local path

    @property
    def is_tsv(self) -> bool:
        return self.tgt is None

    @property
    def origin(self) -> str:
        """The input as the user named it, for rejects, the `origin` column and errors:
        `data/train.{en,zh}` (relative paths stay relative, so outputs neither depend
        on nor reveal where the corpus was on the machine that prepared it)."""
        src, tgt = (self._as_given(u) if u else u for u in (self.src, self.tgt))
        return src if tgt is None else brace_pair(src, tgt)

    def _as_given(self, url: str) -> str:
        return os.path.relpath(url) if self.relative else url

    def urls(self) -> list[str]:
        return [self.src] if self.tgt is None else [self.src, self.tgt]


def brace_pair(a: str, b: str) -> str:
    """`/d/train.{en,zh}.gz` for `/d/train.en.gz` and `/d/train.zh.gz`: common ends kept."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    end = len(a) - tail, len(b) - tail
    return f"{a[:head]}{{{a[head : end[0]]},{b[head : end[1]]}}}{a[end[0] :]}"


def split_archive_url(url: str) -> tuple[str, str] | None:
    """(member, archive) for fsspec's `tar://MEMBER::ARCHIVE` chained URL, else None."""
    if not url.startswith(TAR_PREFIX) or "::" not in url:
        return None
    member, archive = url[len(TAR_PREFIX) :].split("::", 1)
    return member.lstrip("/"), archive


def _side_url(prefix: str, lang: str, compression: str) -> str:
    archived = split_archive_url(prefix)
    if archived:
        member, archive = archived
        return f"{TAR_PREFIX}{member}.{lang}{compression}::{archive}"
    return f"{prefix}.{lang}{compression}"


def _find_side(prefix: str, lang: str, role: str) -> str:
    """`PREFIX.LANG`, or the first of `PREFIX.LANG.gz`/`.bz2`/`.xz`/`.zst` that exists."""
    if split_archive_url(prefix):
        # Listing a compressed archive means reading all of it; the reader reports a
        # missing member instead.
        return _side_url(prefix, lang, "")
    tried = [_side_url(prefix, lang, c) for c in COMPRESSION_SUFFIXES]
    for url in tried:
        if fsio.exists(url):
            return fsio.canonical_url(url)
    message = f"no file for {prefix}.{lang}: tried {', '.join(tried)}"
    raise _missing(prefix, f"--{role}pref", message)


def _missing(url: str, option: str, message: str) -> InputError:
    """The error of an input not found: that its bucket does not exist, where that is
    why (`fsio.require_bucket`), else `message`."""
    fsio.require_bucket(url, option)
    return InputError(message)


def _has_glob(url: str) -> bool:
    return any(c in url for c in "*?[")


def _glob(pattern: str) -> list[str]:
    fs, path = fsio.url_to_fs(pattern)
    return sorted(fsio.canonical_url(fs.unstrip_protocol(p)) for p in fs.glob(path))


def _is_relative(url: str) -> bool:
    """A local path the user gave relative to the current directory."""
    return "://" not in url and not os.path.isabs(url)


def resolve_pair_prefix(prefix: str, src_lang: str, tgt_lang: str, role: str) -> list[CorpusInput]:
    """Inputs for a fairseq-style prefix (`PREFIX.{src,tgt}`); globs allowed in PREFIX."""
    rel = _is_relative(prefix)
    if not _has_glob(prefix) or split_archive_url(prefix):
        src, tgt = _find_side(prefix, src_lang, role), _find_side(prefix, tgt_lang, role)
        return [CorpusInput(role, src, tgt, relative=rel and not split_archive_url(prefix))]
    side = re.compile(
        re.escape(f".{src_lang}") + "(" + "|".join(map(re.escape, COMPRESSION_SUFFIXES[1:])) + ")?$"
    )
    prefixes = sorted({side.sub("", m) for m in _glob(f"{prefix}.{src_lang}*") if side.search(m)})
    if not prefixes:
        raise _missing(
            prefix,
            f"--{role}pref",
            f"no files match {prefix}.{src_lang} (with or without compression suffix)",
        )
    return [
        CorpusInput(
            role, _find_side(p, src_lang, role), _find_side(p, tgt_lang, role), relative=rel
        )
        for p in prefixes
    ]


def parse_columns(text: str) -> tuple[int, int]:
    """`"0,1"` → (0, 1): the TSV columns holding the source and the target."""
    try:
        cols = tuple(int(c) for c in text.split(","))
    except ValueError:
        cols = ()
    if len(cols) != 2 or min(cols) < 0 or cols[0] == cols[1]:
        raise ConfigError(
            f"--tsv-columns wants two different column numbers like 0,1, not {text!r}"
        )
    return cols  # type: ignore[return-value]


def resolve_tsv(pattern: str, columns: tuple[int, int], role: str) -> list[CorpusInput]:
    """Inputs for a TSV file or glob of TSV files."""
    if split_archive_url(pattern):
        return [CorpusInput(role, pattern, None, columns)]
    urls = _glob(pattern) if _has_glob(pattern) else [pattern]
    if not urls:
        raise _missing(pattern, "--tsv", f"no files match {pattern}")
    for url in urls:
        if not fsio.exists(url):
            raise _missing(url, "--tsv", f"no such file: {url}")
    rel = _is_relative(pattern)
    return [CorpusInput(role, fsio.canonical_url(u), None, columns, rel) for u in urls]
