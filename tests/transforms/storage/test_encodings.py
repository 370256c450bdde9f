"""Finding a text input's encoding, and UTF-16 transcoded as it is read."""

from __future__ import annotations

import codecs

import pytest

from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.storage.encodings import (
    alignment_hint,
    canonical,
    checked,
    decoding_codec,
    misread,
    sniff,
    transcoded,
    transcodes,
    trusted,
)
from tests.helpers import shared_lines

ZH = shared_lines("tatoeba-cmn", "zh")[1000:1300]
EN = shared_lines("tatoeba-cmn", "en")[1000:1300]
NTREX_ZH = shared_lines("ntrex128-enzh", "zh")
NTREX_EN = shared_lines("ntrex128-enzh", "en")  # ASCII but for 19 lines (£, €, á...)


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


def test_an_ascii_text_with_a_stray_bad_line_is_utf8():
    """Before: found cp1250 (no line needed UTF-8's multi-byte characters), and the bad
    line kept as "˙ţ bad"."""
    lines = [line.encode() for line in NTREX_EN if line.isascii()]
    data = b"\n".join([*lines[:100], b"\xff\xfe bad", *lines[100:]]) + b"\n"
    assert sniff(data, whole=True) == "utf-8"  # the line is a reject


def test_a_few_latin1_lines_in_ascii_are_rejects_many_are_latin1():
    """From one line no code page can be told (the detector read "café naïve" as cp1250's
    "café naďve"): it is a reject of a UTF-8 text. Past 1% of the lines, it is not UTF-8."""
    few = text(EN, "utf-8") + "café naïve\n".encode("latin-1")
    assert sniff(few, whole=True) == "utf-8"
    accented = [line.replace("e", "é", 1) if i % 20 == 0 else line for i, line in enumerate(EN)]
    assert sniff(text(accented, "latin-1"), whole=True) not in ("utf-8", "utf-8-sig")


def test_western_text_that_several_code_pages_read_alike_is_cp1252():
    """Before: cp1250, the first of four that read "Café crème" alike to the detector,
    which made "crème" "crčme"; a text only one of them reads is still that one's."""
    western = ["Café crème brûlée.", "Das Mädchen isst über Äpfel."]
    assert sniff(text(western, "cp1252"), whole=True) == "cp1252"
    polish = ["Zażółć gęślą jaźń. Łódź jest piękna.", "Święty Mikołaj przyniósł prezenty."]
    assert sniff(text(polish, "cp1250"), whole=True) == "cp1250"
    assert sniff(text(["Съешь же ещё этих мягких булок."], "cp1251"), whole=True) == "cp1251"


def test_utf8_with_nul_bytes_is_not_utf16_or_utf32():
    """Before: fixed-width records padded with NULs were found UTF-16 or UTF-32 (each
    read as one line, or a crash: a code point out of range)."""
    for pad in (b"\0", b"\0\0", b"\0\0\0\0"):
        padded = b"".join(line.encode() + pad * (120 - len(line)) + b"\n" for line in EN)
        assert sniff(padded, whole=True) == "utf-8"
    interleaved = "\n".join(line + "\0" * len(line) for line in EN).encode() + b"\n"
    assert sniff(interleaved, whole=True) == "utf-8"


def test_utf16_without_a_mark_is_whole_code_units():
    data = text(EN[:50], "utf-16-le")
    assert sniff(data, whole=True) == "utf-16-le"
    assert sniff(data + b"x", whole=True) == "utf-8"  # an odd length: no UTF-16
    assert sniff(data[:-1], whole=False) == "utf-16-le"  # a sample may be cut anywhere


@pytest.mark.parametrize(
    ("data", "named", "problem"),
    [
        (  # before: 440 of 1,997 pairs kept, as mojibake
            text(NTREX_ZH, "gb18030"),
            "big5",
            "read as big5 it is not plausible text (1,997 of 1,997 sampled lines); it reads "
            "cleanly as gb18030",
        ),
        (  # before: 28 kept
            text(NTREX_ZH, "utf-8"),
            "gb18030",
            "read as gb18030 it is not plausible text (1,997 of 1,997 sampled lines); it "
            "reads cleanly as utf-8",
        ),
        (  # every line decodes: "Â£2.8bn"
            text(NTREX_EN, "utf-8"),
            "cp1252",
            "read as cp1252 it is not plausible text (19 of 1,997 sampled lines); it reads "
            "cleanly as utf-8",
        ),
        (  # every line decodes: "Ïðèâåò"
            text(["Привет мир, как дела?", "Всё хорошо, спасибо."] * 20, "cp1251"),
            "iso8859-1",
            "read as iso8859-1 it is not plausible text (40 of 40 sampled lines); it reads "
            "cleanly as cp1251",
        ),
        (  # before: a line-count mismatch, or lines of NULs
            text(ZH, "utf-16"),
            "gb18030",
            "read as gb18030 it is not plausible text (302 of 304 sampled lines); it reads "
            "cleanly as utf-16",
        ),
        (  # before: a bare UnicodeError
            text(EN, "utf-16-le"),
            "utf-16",
            "read as utf-16 it has no byte-order mark to tell its byte order (name utf-16-le "
            "or utf-16-be); it reads cleanly as utf-16-le",
        ),
        (
            text(EN, "utf-8"),
            "utf-16-le",
            "read as utf-16-le it is not plausible text (300 of 300 sampled lines); it reads "
            "cleanly as utf-8",
        ),
        (  # no encoding reads it: it is refused all the same
            (bytes(range(128, 256)) + b"\n") * 40,
            "utf-8",
            "read as utf-8, 40 of 40 sampled lines are not utf-8",
        ),
    ],
    ids=[
        "gb18030-as-big5",
        "utf8-as-gb18030",
        "utf8-as-cp1252",
        "cp1251-as-latin1",
        "utf16-as-gb18030",
        "unmarked-utf16",
        "utf8-as-utf16le",
        "no-text",
    ],
)
def test_a_named_encoding_that_plainly_is_not_the_texts(data, named, problem):
    assert misread(data, named, whole=True) == problem


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (text(NTREX_ZH, "gb18030", "\r\n"), "gb18030"),
        (text([z for z in ZH if z.encode("big5", "replace").count(b"?") == 0], "big5"), "big5"),
        (text(ZH, "utf-8") + b"broken \xff line\n", "utf-8"),  # a reject
        (text(ZH, "utf-16"), "utf-16"),
        (text(EN, "utf-16-be"), "utf-16-be"),
        (text(EN, "utf-32"), "utf-32"),
        # The detector's guess is no better than the user's where both read text: it finds
        # cp1250 for these.
        (text(EN, "utf-8") + "café naïve\n".encode("latin-1"), "iso8859-1"),
        (text([e.replace("e", "é", 1) for e in EN], "latin-1"), "iso8859-1"),
        (text(EN, "utf-8"), "gb18030"),  # ASCII: the same in both
        (b"", "utf-16"),
    ],
    ids=[
        "gb18030",
        "big5",
        "utf8-a-reject",
        "utf16",
        "utf16be",
        "utf32",
        "latin1-a-line",
        "latin1",
        "ascii",
        "empty",
    ],
)
def test_a_named_encoding_that_may_be_the_texts(data, named):
    assert misread(data, named, whole=True) is None


def test_a_refused_encoding_is_an_input_error_naming_the_file_and_option():
    assert trusted("a.zh", "gb18030", text(ZH, "gb18030"), True, "--tgt-encoding") == "gb18030"
    with pytest.raises(InputError, match=r"^a\.zh: read as big5 .*: check --tgt-encoding$"):
        trusted("a.zh", "big5", text(NTREX_ZH, "gb18030"), True, "--tgt-encoding")


def test_one_line_shows_no_encoding():
    """A stray bad line in a small text is a reject, whatever decodes it: a code page
    reads any bytes (here cp037, EBCDIC)."""
    assert misread(text(EN[:6], "utf-8") + b"caf\xe9\n", "utf-8", whole=True) is None
    assert misread(b"\x80", "utf-8", whole=True) is None


def test_a_line_count_mismatch_names_encodings_that_may_be_why():
    assert alignment_hint(("utf-8", "utf-8-sig")) == ""
    assert alignment_hint(("utf-8", "gb18030")) == (
        " (read as utf-8 and gb18030: a side read in an encoding not its own splits into "
        "other lines; name it with --src-encoding/--tgt-encoding)"
    )


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
