"""The refresh lock: exclusive create on the real S3 protocol (moto)."""

from __future__ import annotations

import json

import pytest

from nmtpipe.transforms.errors import OutputError
from nmtpipe.transforms.storage import fsio, versions


def test_the_lock_is_exclusive_on_s3(s3):
    url = fsio.join(s3, "root", versions.VERSIONS, versions.LOCK)
    assert versions._create(url, {"token": "first"})
    # A second exclusive create is refused (If-None-Match), and the first holder stays.
    assert not versions._create(url, {"token": "second"})
    assert json.loads(fsio.read_bytes(url)) == {"token": "first"}
    fsio.remove(url)
    with versions.lock(fsio.join(s3, "root")) as held:
        second = versions.lock(fsio.join(s3, "root"))
        with pytest.raises(OutputError, match=r"another refresh holds .*\.lock"), second:
            pass
        assert json.loads(fsio.read_bytes(url))["token"] == held["token"]
    assert not fsio.exists(url)  # released


def test_a_store_that_overwrites_instead_of_refusing_is_caught(tmp_path, monkeypatch):
    # What an older s3fs did: "xb" silently overwrote. The lock reads back its token.
    def overwriting_create(url, content):
        fsio.write_bytes(url, json.dumps({**content, "token": "someone else"}).encode())
        return True

    monkeypatch.setattr(versions, "_create", overwriting_create)
    held = versions.lock(str(tmp_path))
    with pytest.raises(OutputError, match="did not honour exclusive create"), held:
        pass
