"""Turn the user's input arguments into the list of things to read.

fairseq names a parallel corpus by a prefix (`train` for `train.en` + `train.zh`); T2T's
datasets come as members of `.tgz` archives, CWMT's and WMT's as pairs of files named
each its own way (`casia2015_en.txt` + `casia2015_ch.txt`, `-src.en.sgm` +
`-ref.zh.sgm`); OPUS's as members of `.zip` archives; Tatoeba-style data comes as TSV.
They resolve here, on the driver, into `CorpusInput`s, so that a missing file is
reported before any pipeline starts. Tables (Parquet, JSON Lines, Arrow, TMX) resolve in
`transforms/formats/corpus/tables.py`, which reads their schemas.
"""

from __future__ import annotations

import difflib
import os
import re
import zipfile
from dataclasses import dataclass

import fsspec
from fsspec.utils import infer_compression

from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.storage import encodings, fsio
from nmtpipe.transforms.storage.encodings import AUTO

COMPRESSION_SUFFIXES = ("", ".gz", ".bz2", ".xz", ".zst")
TAR_PREFIX = "tar://"
ARCHIVE_PREFIXES = (TAR_PREFIX, "zip://")
# How an input holds its pairs: text lines (a pair of files, or one TSV file when it has
# no `tgt`), or a table of records (`transforms/formats/corpus/`).
LINES, PARQUET, JSONL, ARROW, TMX = "lines", "parquet", "jsonl", "arrow", "tmx"


@dataclass(frozen=True)
class CorpusInput:
    """One unit of reading: a pair of line-aligned files, one TSV file, or one table.

    `role` is the split the pairs go to; `train` input is also where valid and test
    pairs are carved from when those splits have no input of their own. `fields`: a
    table's two fields (dotted paths into structs) or a TMX's two languages.
    `encodings`: each side's, as the user named it, or `auto`.
    """

    role: str
    src: str
    tgt: str | None = None
    columns: tuple[int, int] = (0, 1)
    # Where the user named it by a relative local path: the directory it was relative to
    # (the planner's, recorded here: a worker's may be any other).
    base: str | None = None
    layout: str = LINES
    fields: tuple[str, str] | None = None
    encodings: tuple[str, str] = (AUTO, AUTO)

    @property
    def origin(self) -> str:
        """The input as the user named it, for rejects, the `origin` column and errors:
        `data/train.{en,zh}` (relative paths stay relative, so outputs neither depend
        on nor reveal where the corpus was on the machine that prepared it)."""
        src, tgt = (self._as_given(u) if u else u for u in (self.src, self.tgt))
        return src if tgt is None else brace_pair(src, tgt)

    def _as_given(self, url: str) -> str:
        return os.path.relpath(url, self.base) if self.base else url

    def urls(self) -> list[str]:
        return [self.src] if self.tgt is None else [self.src, self.tgt]


def brace_pair(a: str, b: str) -> str:
    """`/d/train.{en,zh}.gz` for `/d/train.en.gz` and `/d/train.zh.gz`: common ends kept,
    the braces around whole words."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    while 0 < head < min(len(a), len(b)) and a[head - 1].isalnum() and a[head].isalnum():
        head -= 1  # whole words in the braces: Book1_{en,cn}.txt, not Book1_{e,c}n.txt
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    while 0 < tail < min(len(a), len(b)) - head and a[-tail].isalnum() and a[-1 - tail].isalnum():
        tail -= 1
    end = len(a) - tail, len(b) - tail
    return f"{a[:head]}{{{a[head : end[0]]},{b[head : end[1]]}}}{a[end[0] :]}"


def split_archive_url(url: str) -> tuple[str, str] | None:
    """(member, archive) for fsspec's `tar://MEMBER::ARCHIVE` chained URL, else None."""
    if not url.startswith(TAR_PREFIX) or "::" not in url:
        return None
    member, archive = url[len(TAR_PREFIX) :].split("::", 1)
    return member.lstrip("/"), archive


def archive_member(url: str) -> tuple[str, str, str] | None:
    """(protocol, member, archive) for `tar://MEMBER::ARCHIVE` and `zip://MEMBER::ARCHIVE`,
    else None."""
    for prefix in ARCHIVE_PREFIXES:
        if url.startswith(prefix) and "::" in url:
            member, archive = url[len(prefix) :].split("::", 1)
            return prefix[: -len("://")], member.lstrip("/"), archive
    return None


def file_name(url: str) -> str:
    """The name a file's format and compression are read from: an archive member's own
    (`zip://a.en.gz::b.zip` → `a.en.gz`); the last file of another chain."""
    member = archive_member(url)
    return member[1] if member else url.rsplit("::", 1)[-1]


def compression_of(url: str) -> str | None:
    """fsspec's name of the compression `url`'s name says (`gzip` for `.gz`), or None."""
    return infer_compression(file_name(url))


def without_compression(name: str) -> str:
    """`a.sgm` for `a.sgm.gz`."""
    compression = infer_compression(name)
    return name.rsplit(".", 1)[0] if compression else name


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


# The stores whose first path part is a bucket (a Hugging Face path's is not).
_BUCKET_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"}


def _missing(url: str, option: str, message: str) -> InputError:
    """The error of an input not found: that its bucket does not exist, where that is
    why (`fsio.require_bucket`), else `message`. An archive member's bucket is its
    archive's (the URL after the last `::`)."""
    stored = url.rsplit("::", 1)[-1]
    if stored.split("://", 1)[0] in _BUCKET_STORES and "://" in stored:
        fsio.require_bucket(stored, option)
    return InputError(message)


def _has_glob(url: str) -> bool:
    return any(c in url for c in "*?[")


def _glob(pattern: str) -> list[str]:
    fs, path = fsio.url_to_fs(pattern)
    return sorted(fsio.canonical_url(fs.unstrip_protocol(p)) for p in fs.glob(path))


def _is_relative(url: str) -> bool:
    """A local path the user gave relative to the current directory."""
    return "://" not in url and not os.path.isabs(url)


def base_of(relative: bool) -> str | None:
    """`CorpusInput.base` of an input named by a relative path (or not)."""
    return os.getcwd() if relative else None


def resolve_pair_prefix(
    prefix: str,
    src_lang: str,
    tgt_lang: str,
    role: str,
    wanted: tuple[str, str] = (AUTO, AUTO),
) -> list[CorpusInput]:
    """Inputs for a fairseq-style prefix (`PREFIX.{src,tgt}`); globs allowed in PREFIX;
    each side in its `wanted` encoding or `auto`."""
    rel = _is_relative(prefix)
    found = tuple(encodings.checked(e) for e in wanted)
    if not _has_glob(prefix) or split_archive_url(prefix):
        src, tgt = _find_side(prefix, src_lang, role), _find_side(prefix, tgt_lang, role)
        relative = rel and not split_archive_url(prefix)
        return [CorpusInput(role, src, tgt, base=base_of(relative), encodings=found)]
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
            role,
            _find_side(p, src_lang, role),
            _find_side(p, tgt_lang, role),
            base=base_of(rel),
            encodings=found,
        )
        for p in prefixes
    ]


def nearest(member: str, names: list[str]) -> str:
    """The members nearest a misspelled one, as a hint (several: a pair's other side is
    often as near as the one meant)."""
    near = difflib.get_close_matches(member, names, n=3)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def missing(url: str) -> str:
    """What a missing `url` is, in one line: a member not in its zip archive (with the
    nearest), a missing archive, or a missing file."""
    archived = archive_member(url)
    if archived is None:
        return f"no such file: {url}"
    protocol, member, archive = archived
    try:
        with fsspec.open(archive, "rb") as f:
            if protocol != "zip":
                return f"no such file: {url}"
            with zipfile.ZipFile(f) as zipped:
                names = zipped.namelist()
    except FileNotFoundError:
        return f"no such file: {archive}, the archive of {url}"
    except (OSError, zipfile.BadZipFile) as e:
        return f"cannot read {archive}: {e}"
    return f"{archive} has no member {member}{nearest(member, names)}"


def _check_exists(url: str, option: str) -> str:
    """`url` made canonical, or InputError if it is not there (named with the `option`
    that gave it where its bucket is missing). A tar member is not looked for: finding
    it means reading the archive, so the reader reports it."""
    if split_archive_url(url):
        return url
    try:
        there = fsio.exists(url)
    except FileNotFoundError:  # the archive of a member
        there = False
    except (OSError, zipfile.BadZipFile) as e:  # the archive of a member, damaged
        raise InputError(f"cannot read {url}: {e}") from e
    if not there:
        raise _missing(url, option, missing(url))
    # A chained URL (`zip://MEMBER::ARCHIVE`) stays as written: its filesystem's own
    # name for the file would drop the archive.
    return url if "::" in url else fsio.canonical_url(url)


def resolve_pair(
    src: str, tgt: str, role: str, wanted: tuple[str, str] = (AUTO, AUTO)
) -> CorpusInput:
    """An explicit pair of line-aligned files (any URL; `tar://` and `zip://` members;
    SGML files by their `.sgm` suffix), each side in its `wanted` encoding or `auto`."""
    option = f"--{role}-pair"
    found = _check_exists(src, option), _check_exists(tgt, option)
    if found[0] == found[1]:
        raise ConfigError(f"{src} is both sides of a pair")
    rel = _is_relative(src) and _is_relative(tgt)
    return CorpusInput(
        role, *found, base=base_of(rel), encodings=tuple(encodings.checked(e) for e in wanted)
    )


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


def resolve_files(pattern: str, option: str) -> list[str]:
    """The files a URL or glob names (given with `option`), each checked to exist (a tar
    member is not), in order."""
    if split_archive_url(pattern):
        return [pattern]
    urls = _glob(pattern) if _has_glob(pattern) else [pattern]
    if not urls:
        raise _missing(pattern, option, f"no files match {pattern}")
    return [_check_exists(u, option) for u in urls]


def resolve_tsv(
    pattern: str, columns: tuple[int, int], role: str, wanted: str = AUTO
) -> list[CorpusInput]:
    """Inputs for a TSV file or glob of TSV files (in encoding `wanted`, or `auto`)."""
    rel = _is_relative(pattern) and not split_archive_url(pattern)
    found = (encodings.checked(wanted), AUTO)
    return [
        CorpusInput(role, url, None, columns, base_of(rel), encodings=found)
        for url in resolve_files(pattern, "--tsv")
    ]
