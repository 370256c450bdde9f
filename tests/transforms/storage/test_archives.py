"""Archive members' sizes from their archive's index: tar headers, zip's central
directory."""

from __future__ import annotations

import gzip
import tarfile
import zipfile
from pathlib import Path

from nmtpipe.transforms.storage.archives import member_sizes
from tests.helpers import write_tgz

TEXT = {"d/a.en": b"Hello.\n" * 5000, "d/a.zh": "你好。\n".encode() * 4000, "d/b.en": b"x\n"}


def test_a_tgz_gives_its_members_uncompressed_sizes(tmp_path: Path):
    archive = write_tgz(tmp_path / "t.tgz", TEXT)
    assert archive.stat().st_size < 2_000  # what the old estimate started from
    assert member_sizes("tar", str(archive), ["d/a.en", "d/a.zh"]) == {
        "d/a.en": 35_000,
        "d/a.zh": 40_000,
    }


def test_a_zip_gives_its_members_uncompressed_sizes_a_gz_member_its_own(tmp_path: Path):
    archive = tmp_path / "o.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in TEXT.items():
            z.writestr(name, data)
        z.writestr("d/c.en.gz", gzip.compress(TEXT["d/a.en"]))  # its size: compressed
    wanted = ["d/a.en", "d/a.zh", "d/c.en.gz"]
    sizes = member_sizes("zip", str(archive), wanted)
    assert sizes == {"d/a.en": 35_000, "d/a.zh": 40_000, "d/c.en.gz": sizes["d/c.en.gz"]}
    assert sizes["d/c.en.gz"] < 1_000


def test_members_named_as_the_reader_names_them_and_only_regular_files(tmp_path: Path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.en").write_bytes(b"a\n" * 10)
    (folder / "a.zh").write_bytes(b"b\n" * 20)
    (folder / "link.en").symlink_to("a.en")
    archive = tmp_path / "t.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(folder, arcname="./d")  # ./d, ./d/a.en, ./d/a.zh, ./d/link.en (a link)
    wanted = ["d", "d/a.en", "d/a.zh", "d/link.en", "d/none.en"]
    found = member_sizes("tar", str(archive), wanted)
    assert found == {"d/a.en": 20, "d/a.zh": 40}


def test_an_archive_that_cannot_be_read_tells_what_it_found_before(tmp_path: Path):
    archive = write_tgz(tmp_path / "t.tgz", TEXT)
    data = archive.read_bytes()
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(data[: len(data) - 30])  # the last member's data and the end lost
    assert member_sizes("tar", str(cut), ["d/a.en", "d/b.en"]) == {"d/a.en": 35_000}
    (tmp_path / "bad.zip").write_bytes(b"PK not a zip")
    assert member_sizes("zip", str(tmp_path / "bad.zip"), ["d/a.en"]) == {}
    assert member_sizes("tar", str(tmp_path / "bad.zip"), ["d/a.en"]) == {}


def test_a_tar_is_read_only_as_far_as_the_last_member_wanted(tmp_path: Path, monkeypatch):
    archive = write_tgz(tmp_path / "t.tgz", {"a.en": b"a\n", "b.en": b"b\n", "c.en": b"c\n"})
    headers = []
    read_header = tarfile.TarInfo.fromtarfile.__func__

    def counted(cls, tar):
        headers.append(tar.offset)
        return read_header(cls, tar)

    monkeypatch.setattr(tarfile.TarInfo, "fromtarfile", classmethod(counted))
    assert member_sizes("tar", str(archive), ["a.en"]) == {"a.en": 2}
    assert len(headers) == 1  # neither b.en's header nor c.en's read
    assert member_sizes("tar", str(archive), ["c.en"]) == {"c.en": 2}
    assert len(headers) == 1 + 3
