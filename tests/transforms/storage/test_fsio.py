"""Atomic writes on local disk, memory:// and S3 (moto), and input identities."""

from __future__ import annotations

import errno
import hashlib
import os

import fsspec
import pytest

from nmtpipe.transforms.errors import InputError, NoSpaceError, OutputError, StorageError
from nmtpipe.transforms.storage import fsio
from tests.flaky_fs import FullMemoryFileSystem


class Boom(Exception):
    pass


def test_local_write_is_atomic_and_hashed(tmp_path):
    url = str(tmp_path / "sub" / "f.bin")
    written = fsio.write_bytes(url, b"hello")
    assert written == fsio.WrittenFile(url, 5, hashlib.sha256(b"hello").hexdigest())
    with pytest.raises(Boom), fsio.atomic_write(url) as f:
        f.write(b"half of a new versi")
        raise Boom
    assert (tmp_path / "sub" / "f.bin").read_bytes() == b"hello"  # old content untouched
    assert os.listdir(tmp_path / "sub") == ["f.bin"]  # no temporary file left behind


def test_memory_write_is_atomic():
    url = "memory://atomic/f.bin"
    with pytest.raises(Boom), fsio.atomic_write(url) as f:
        f.write(b"partial")
        assert not fsio.exists(url)
        raise Boom
    assert not fsspec.filesystem("memory").exists("/atomic/f.bin")
    assert fsspec.filesystem("memory").ls("/atomic") == []
    fsio.write_bytes(url, b"done")
    assert fsio.read_bytes(url) == b"done"


def test_s3_write_is_invisible_until_committed(s3):
    url = f"{s3}/dir/f.bin"
    with pytest.raises(Boom), fsio.atomic_write(url) as f:
        f.write(b"x" * 10_000_000)  # several multipart parts
        raise Boom
    assert not fsio.exists(url)
    with fsio.atomic_write(url) as f:
        f.write(b"x" * 10_000_000)
        fs, path = fsio.url_to_fs(url)
        fs.invalidate_cache()
        assert not fs.exists(path)  # not visible before the commit
    assert fsio.read_bytes(url) == b"x" * 10_000_000
    assert f.written is not None and f.written.size == 10_000_000


def test_a_missing_bucket_is_an_error_never_created(s3):
    """s3fs's makedirs would create the bucket: a typo would make a new bucket."""
    import s3fs

    url = "s3://nmtpipe-tset/dir/f.bin"
    with pytest.raises(OutputError, match="the bucket nmtpipe-tset does not exist"):
        fsio.write_bytes(url, b"x")
    with pytest.raises(OutputError, match=r"^s3://nmtpipe-tset/out: the bucket"):
        fsio.require_bucket("s3://nmtpipe-tset/out")
    assert "nmtpipe-tset" not in s3fs.S3FileSystem().ls("")
    fsio.require_bucket(f"{s3}/out")  # an existing bucket passes
    fsio.require_bucket("memory://anything/at/all")  # as do stores without buckets
    # An input there: the option that named it, and nothing to create.
    with pytest.raises(InputError) as raised:
        fsio.require_bucket("s3://nmtpipe-tset/train", "--trainpref")
    assert str(raised.value) == (
        "--trainpref s3://nmtpipe-tset/train: the bucket nmtpipe-tset does not exist; "
        "correct its name"
    )


@pytest.mark.parametrize("spooled", [False, True])
def test_a_full_disk_names_the_file_and_leaves_no_part_of_it(spooled):
    FullMemoryFileSystem.reset(capacity=1000)
    url = "fullfs://out/part.bin"
    with pytest.raises(NoSpaceError) as raised:
        if spooled:
            with fsio.spooled_write(url) as f:
                f.write(b"x" * 2000)
        else:
            fsio.write_bytes(url, b"x" * 2000)
    assert str(raised.value) == f"could not write {url}: no space left on device"
    assert FullMemoryFileSystem().find("/out") == []


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (
            OSError(errno.EIO, "Bad Gateway"),
            "OSError: [Errno 5] Bad Gateway (gave up after 2 attempts)",
        ),
        (OSError(errno.EINVAL, "Bad Request"), "OSError: [Errno 22] Bad Request"),
    ],
    ids=["lasting-server-error", "other-answer"],
)
def test_a_bucket_store_that_fails_is_named_with_its_answer(monkeypatch, error, cause):
    class Store:
        """A bucket store whose every look at a bucket fails (s3fs's translated errors)."""

        protocol, retries = "s3", 6  # nmtpipe's own tries: 2

        def info(self, path: str) -> dict:
            raise error

    monkeypatch.setattr(fsio, "url_to_fs", lambda url: (Store(), url.removeprefix("s3://")))
    with pytest.raises(StorageError) as raised:
        fsio.require_bucket("s3://b/out")
    assert str(raised.value) == f"s3://b/out: could not look for the bucket b: {cause}"


def test_a_failed_job_leaves_no_output_folder_it_made_empty(tmp_path):
    (tmp_path / "there").mkdir()
    (tmp_path / "there" / "other.txt").write_text("x")
    for output in (tmp_path / "new" / "out", tmp_path / "there" / "out", tmp_path / "there"):
        with pytest.raises(Boom), fsio.output_folder(str(output)):
            assert output.is_dir()
            raise Boom
    assert sorted(p.name for p in tmp_path.iterdir()) == ["there"]
    assert [p.name for p in (tmp_path / "there").iterdir()] == ["other.txt"]
    # What the job wrote stays, in the folders it needs (a run's checkpoints, say).
    with pytest.raises(Boom), fsio.output_folder(str(tmp_path / "new" / "out")):
        (tmp_path / "new" / "out" / "checkpoint_last.pt").write_bytes(b"x")
        raise Boom
    assert (tmp_path / "new" / "out" / "checkpoint_last.pt").exists()
    with fsio.output_folder(str(tmp_path / "kept")):
        pass
    assert (tmp_path / "kept").is_dir()


def test_an_output_folder_is_made_or_the_line_says_what_is_in_the_way(tmp_path):
    (tmp_path / "file").write_text("x")
    fsio.require_output_folder(str(tmp_path / "new" / "out"))
    assert (tmp_path / "new" / "out").is_dir()
    with pytest.raises(OutputError, match=r"/file is a file, not a folder; choose another"):
        fsio.require_output_folder(str(tmp_path / "file"))
    with pytest.raises(OutputError, match=r"/file/out: \S+/file is a file, not a folder"):
        fsio.require_output_folder(str(tmp_path / "file" / "out"))


def test_identity_changes_with_content(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a")
    first = fsio.file_identity(str(path))
    os.utime(path, ns=(1, 1))
    path.write_bytes(b"b")
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert fsio.file_identity(str(path)) != first
    assert first["url"] == str(path) and first["size"] == 1


def test_urls():
    assert fsio.join("s3://b/x/", "y", "/z.json") == "s3://b/x/y/z.json"
    assert fsio.relative_to("s3://b/x", "s3://b/x/y/z") == "y/z"
    assert fsio.canonical_url("file:///tmp/a") == "/tmp/a"
    with pytest.raises(ValueError):
        fsio.relative_to("/a", "/b/c")


def test_a_store_whose_filesystem_is_not_installed_names_its_extra(monkeypatch):
    import sys

    from nmtpipe.transforms.errors import ConfigError

    monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, "hf", raising=False)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"^hf://datasets/o/n/x\.parquet: hf:// needs a package "
                       r"not installed: pip install 'nmtpipe\[hf\]'"):  # fmt: skip
        fsio.url_to_fs("hf://datasets/o/n/x.parquet")
