"""Resolving fairseq-style prefixes, globs, archives and TSV inputs, and the names of
files in archives."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pytest

from nmtpipe.transforms.corpus.inputs import (
    CorpusInput,
    archive_member,
    brace_pair,
    compression_of,
    file_name,
    without_compression,
)
from nmtpipe.transforms.corpus.resolve import (
    parse_columns,
    resolve_pair,
    resolve_pair_prefix,
    resolve_tsv,
)
from nmtpipe.transforms.errors import ConfigError, InputError


def test_prefix_finds_compression_suffixes_by_itself(tmp_path: Path):
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(b"a\n"))
    (tmp_path / "train.zh").write_bytes(b"b\n")
    (inp,) = resolve_pair_prefix(str(tmp_path / "train"), "en", "zh", "train")
    assert inp == CorpusInput("train", f"{tmp_path}/train.en.gz", f"{tmp_path}/train.zh")
    assert inp.origin == f"{tmp_path}/train.{{en.gz,zh}}"


def test_missing_side_lists_what_was_tried(tmp_path: Path):
    (tmp_path / "train.en").write_bytes(b"a\n")
    with pytest.raises(InputError, match=r"no file for .*train\.zh: tried .*train\.zh, .*\.zh\.gz"):
        resolve_pair_prefix(str(tmp_path / "train"), "en", "zh", "train")


def test_glob_prefixes(tmp_path: Path):
    for part in ("a", "b"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "train.en").write_bytes(b"x\n")
        (tmp_path / part / "train.zh.xz").write_bytes(b"")
    inputs = resolve_pair_prefix(str(tmp_path / "*" / "train"), "en", "zh", "train")
    assert [i.src for i in inputs] == [f"{tmp_path}/a/train.en", f"{tmp_path}/b/train.en"]
    assert [i.tgt for i in inputs] == [f"{tmp_path}/a/train.zh.xz", f"{tmp_path}/b/train.zh.xz"]
    with pytest.raises(InputError, match="no files match"):
        resolve_pair_prefix(str(tmp_path / "*" / "dev"), "en", "zh", "valid")


def test_archive_prefix_appends_the_language_to_the_member():
    (inp,) = resolve_pair_prefix("tar://nc/news::data/training.tgz", "en", "zh", "train")
    assert inp.src == "tar://nc/news.en::data/training.tgz"
    assert inp.origin == "tar://nc/news.{en,zh}::data/training.tgz"


def test_tsv_files_and_globs(tmp_path: Path):
    (tmp_path / "a.tsv").write_bytes(b"x\ty\n")
    (tmp_path / "b.tsv").write_bytes(b"x\ty\n")
    inputs = resolve_tsv(str(tmp_path / "*.tsv"), (1, 0), "train")
    assert [(i.src, i.tgt, i.columns) for i in inputs] == [
        (f"{tmp_path}/a.tsv", None, (1, 0)),
        (f"{tmp_path}/b.tsv", None, (1, 0)),
    ]
    with pytest.raises(InputError, match="no such file"):
        resolve_tsv(str(tmp_path / "c.tsv"), (0, 1), "train")


def test_memory_urls(tmp_path: Path):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe({"/inputs/t.en": b"a\n", "/inputs/t.zh": b"b\n"})
    (inp,) = resolve_pair_prefix("memory://inputs/t", "en", "zh", "train")
    assert inp.src == "memory:///inputs/t.en"


@pytest.mark.parametrize("text", ["0", "1,1", "a,b", "0,1,2", "-1,0"])
def test_bad_tsv_columns(text):
    with pytest.raises(ConfigError, match="--tsv-columns"):
        parse_columns(text)


def test_brace_pair():
    assert brace_pair("/d/train.en", "/d/train.zh") == "/d/train.{en,zh}"
    assert brace_pair("s3://b/x.de.gz", "s3://b/x.en.gz") == "s3://b/x.{de,en}.gz"


def test_a_relative_input_keeps_its_relative_name_as_origin(tmp_path: Path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.en").write_bytes(b"a\n")
    (tmp_path / "data" / "train.zh.gz").write_bytes(gzip.compress(b"b\n"))
    (tmp_path / "data" / "t.tsv").write_bytes(b"a\tb\n")
    monkeypatch.chdir(tmp_path)
    (inp,) = resolve_pair_prefix("data/train", "en", "zh", "train")
    assert inp.src == f"{tmp_path}/data/train.en"  # read by its full path
    assert inp.origin == "data/train.{en,zh.gz}"  # recorded as the user named it
    (tsv,) = resolve_tsv("data/*.tsv", (0, 1), "train")
    assert tsv.origin == "data/t.tsv"
    (absolute,) = resolve_pair_prefix(str(tmp_path / "data" / "train"), "en", "zh", "train")
    assert absolute.origin == f"{tmp_path}/data/train.{{en,zh.gz}}"
    # A worker runs in a directory of its own (a cluster's pool, another host): the
    # origin it writes is the planner's.
    monkeypatch.chdir(tmp_path / "data")
    assert (inp.origin, tsv.origin) == ("data/train.{en,zh.gz}", "data/t.tsv")
    assert pickle.loads(pickle.dumps(inp)).origin == "data/train.{en,zh.gz}"


def test_explicit_pairs_any_names_and_archive_members(tmp_path: Path):
    import zipfile

    (tmp_path / "casia2015_en.txt").write_bytes(b"a\n")
    (tmp_path / "casia2015_ch.txt").write_bytes(b"b\n")
    inp = resolve_pair(
        str(tmp_path / "casia2015_en.txt"), str(tmp_path / "casia2015_ch.txt"), "train",
        ("auto", "GBK"),
    )  # fmt: skip
    assert inp.origin == f"{tmp_path}/casia2015_{{en,ch}}.txt"
    assert inp.encodings == ("auto", "gb18030")
    with zipfile.ZipFile(tmp_path / "en-zh.txt.zip", "w") as z:
        z.writestr("OPUS.en-zh.en", "a\n")
        z.writestr("OPUS.en-zh.zh", "b\n")
    zipped = resolve_pair(
        f"zip://OPUS.en-zh.en::{tmp_path}/en-zh.txt.zip",
        f"zip://OPUS.en-zh.zh::{tmp_path}/en-zh.txt.zip",
        "train",
    )
    assert zipped.origin == f"zip://OPUS.en-zh.{{en,zh}}::{tmp_path}/en-zh.txt.zip"
    assert archive_member(zipped.src) == ("zip", "OPUS.en-zh.en", f"{tmp_path}/en-zh.txt.zip")
    with pytest.raises(InputError, match=r"en-zh\.txt\.zip has no member OPUS\.en-zh\.de \(did "
                       r"you mean OPUS\.en-zh\.en or OPUS\.en-zh\.zh\?\)"):  # fmt: skip
        resolve_pair(f"zip://OPUS.en-zh.de::{tmp_path}/en-zh.txt.zip", zipped.tgt, "train")
    with pytest.raises(InputError, match=r"no such file: .*/none\.zip, the archive of zip://a::"):
        resolve_pair(f"zip://a::{tmp_path}/none.zip", zipped.tgt, "train")
    with pytest.raises(ConfigError, match="unknown encoding"):
        resolve_pair(inp.src, inp.tgt, "train", ("auto", "nope"))


def test_names_formats_and_compression_come_from_members():
    assert file_name("zip://a/b.en.gz::x.zip") == "a/b.en.gz"
    assert compression_of("zip://a/b.en.gz::x.zip") == "gzip"
    assert compression_of("zip://b.en::x.zip") is None  # not the archive's .zip
    assert (
        compression_of("s3://b/k.tmx.gz") == "gzip" and without_compression("a.sgm.gz") == "a.sgm"
    )


def test_brace_pair_keeps_whole_words_in_the_braces():
    assert brace_pair("d/Book1_en.txt", "d/Book1_cn.txt") == "d/Book1_{en,cn}.txt"
    assert brace_pair("dev/x-src.en.sgm", "dev/x-ref.zh.sgm") == "dev/x-{src.en,ref.zh}.sgm"
