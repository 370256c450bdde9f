"""Turn the user's input arguments into the list of things to read.

fairseq names a parallel corpus by a prefix (`train` for `train.en` + `train.zh`); T2T's
datasets come as members of `.tgz` archives, CWMT's and WMT's as pairs of files named
each its own way (`casia2015_en.txt` + `casia2015_ch.txt`, `-src.en.sgm` +
`-ref.zh.sgm`); OPUS's as members of `.zip` archives; Tatoeba-style data comes as TSV.
They resolve here, on the driver, into `CorpusInput`s naming their readers, so that a
missing file is reported before any pipeline starts. Tables (Parquet, JSON Lines, Arrow,
CSV, TMX) resolve in `tables.py`, which reads their schemas.
"""

from __future__ import annotations

import os
import re
import zipfile

from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.inputs import TAR_PREFIX, CorpusInput, missing, split_archive_url
from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.storage import encodings, fsio
from nmtpipe.transforms.storage.encodings import AUTO

COMPRESSION_SUFFIXES = ("", ".gz", ".bz2", ".xz", ".zst")


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
    SGML files by their `.sgm` suffix: `registry.pair_reader`), each side in its
    `wanted` encoding or `auto`."""
    option = f"--{role}-pair"
    found = _check_exists(src, option), _check_exists(tgt, option)
    if found[0] == found[1]:
        raise ConfigError(f"{src} is both sides of a pair")
    rel = _is_relative(src) and _is_relative(tgt)
    return CorpusInput(
        role,
        *found,
        base=base_of(rel),
        reader=registry.pair_reader(found),
        encodings=tuple(encodings.checked(e) for e in wanted),
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
        CorpusInput(role, url, None, columns, base_of(rel), reader="tsv", encodings=found)
        for url in resolve_files(pattern, "--tsv")
    ]
