"""Finding a text input's encoding, and UTF-16 transcoded as it is read."""

from __future__ import annotations

import codecs

import pytest

from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage.encodings import (
    canonical,
    checked,
    decoding_codec,
    sniff,
    transcoded,
    transcodes,
)
from tests.helpers import shared_lines

ZH = shared_lines("tatoeba-cmn", "zh")[1000:1300]
EN = shared_lines("tatoeba-cmn", "en")[1000:1300]


def text(lines: list[str], encoding: str, end: str = "\n") -> bytes:
    return (end.join(lines) + end).encode(encoding)


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (text(ZH, "utf-8"), "utf-8"),
        (codecs.BOM_UTF8 + text(ZH, "utf-8"), "utf-8-sig"),
        (text(ZH, "utf-16"), "utf-16"),  # with its byte-order mark
        (codecs.BOM_UTF16_BE + text(ZH, "utf-16-be"), "utf-16"),
        (text(EN, "utf-16-le"), "utf-16-le"),  # no mark: told by its NUL bytes
        (text(EN, "utf-16-be", "\r\n"), "utf-16-be"),
        (text(EN, "utf-32-le"), "utf-32-le"),
        (text(ZH, "gb18030", "\r\n"), "gb18030"),  # CWMT's Chinese
        (text(ZH[:5], "gb18030"), "gb18030"),  # a few lines are enough
        (text(ZH, "gbk"), "gb18030"),  # GB2312 and GBK read as their superset
        (b"", "utf-8"),
    ],
)
def test_sniff(data, found):
    assert sniff(data, whole=True) == found


def test_a_stray_bad_line_does_not_make_utf8_something_else():
    data = text(ZH, "utf-8") + b"broken \xff line\n"
    assert sniff(data, whole=True) == "utf-8"  # the line is a reject, the rest UTF-8


def test_a_sample_may_end_inside_a_character():
    data = text(ZH, "utf-8")
    assert sniff(data[:-2], whole=False) == "utf-8"


def test_latin1_whose_only_accents_are_not_utf8_is_not_utf8():
    data = text(EN, "utf-8") + "café naïve\n".encode("latin-1")
    assert sniff(data, whole=True) not in ("utf-8", "utf-8-sig")


def test_names_as_python_knows_them():
    assert canonical("GBK") == canonical("gb2312") == "gb18030"
    assert canonical("UTF8") == "utf-8" and checked("Auto") == "auto"
    with pytest.raises(ConfigError, match="unknown encoding 'klingon'"):
        checked("klingon")


def test_what_is_transcoded_and_what_decodes_it():
    assert transcodes("utf-16") and transcodes("utf-32-be")
    assert not transcodes("gb18030") and not transcodes("utf-8-sig")
    assert decoding_codec("utf-16") == decoding_codec("utf-8-sig") == "utf-8"
    assert decoding_codec("big5") == "big5"


def test_transcoding_streams_blocks_split_anywhere():
    data = text(ZH, "utf-16")
    blocks = [data[i : i + 7] for i in range(0, len(data), 7)]  # odd: inside characters
    assert b"".join(transcoded(blocks, "utf-16")) == text(ZH, "utf-8")


def test_what_utf16_cannot_decode_becomes_bytes_that_utf8_cannot():
    lone = "a\n".encode("utf-16-le") + b"\x00\xd8" + "\nb\n".encode("utf-16-le") + b"x"
    out = b"".join(transcoded([lone], "utf-16-le"))
    lines = out.split(b"\n")
    assert lines[0] == b"a" and lines[2] == b"b"
    for bad in (lines[1], lines[3]):  # a lone surrogate; a last odd byte
        with pytest.raises(UnicodeDecodeError):
            bad.decode("utf-8")
