"""Which encoding a text input is written in, and its bytes as UTF-8 where they must be.

Lines stay bytes until the cleaner decodes them one at a time, so that a line that is
not valid in its encoding is a reject and not a crash (`raw_corpus.py`). That needs the
byte `\\n` to be a line end and never part of another character: true of UTF-8 and of
every ASCII-compatible encoding (GB2312/GBK/GB18030, Big5, Shift_JIS, EUC-*, the ISO-8859
and Windows code pages), whose lines are therefore split as they are and decoded later
with their own codec. UTF-16 and UTF-32 are not: they are transcoded to UTF-8 as they are
read, a block at a time.

An input's encoding is found from its first bytes (`sniff`): a byte-order mark, else
UTF-8 if the sample is UTF-8 (a stray bad line does not count against it: it is a
reject), else what charset-normalizer says of it. Chinese corpora of the CWMT era are
GB2312, GBK or GB18030; all three are read as GB18030, which decodes every text of the
other two.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator

from nmtpipe.transforms.errors import ConfigError

AUTO = "auto"
UTF8 = "utf-8"
UTF8_BOM_NAME = "utf-8-sig"  # UTF-8 that starts with a byte-order mark
SAMPLE_BYTES = 1 << 20
# Byte-order marks, UTF-32's before UTF-16's (FF FE 00 00 starts with FF FE).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, UTF8_BOM_NAME),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# What a detector's answer is read as: the superset that decodes all of it.
_SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "hz": "gb18030", "ascii": UTF8}
# Share of a sample's lines that may be invalid UTF-8 for the sample still to be UTF-8.
_BAD_LINE_SHARE = 0.01
# Share of NUL bytes that marks UTF-16 or UTF-32 written without a byte-order mark.
_NUL_SHARE = 0.1


def canonical(name: str) -> str:
    """Python's name of encoding `name` (`GBK` → gb18030, `UTF8` → utf-8); ConfigError
    for one Python does not know."""
    try:
        found = codecs.lookup(name).name
    except LookupError:
        raise ConfigError(f"unknown encoding {name!r} (any of Python's codecs)") from None
    return _SUPERSETS.get(found, found)


def checked(name: str) -> str:
    """An encoding the user named (or `auto`), as Python names it."""
    return AUTO if name.lower() == AUTO else canonical(name)


def transcodes(encoding: str) -> bool:
    """Whether an input in `encoding` is transcoded to UTF-8 as it is read: its lines
    cannot be split on the byte `\\n` (UTF-16, UTF-32)."""
    if encoding == UTF8_BOM_NAME:
        return False
    try:
        return "\n".encode(encoding) != b"\n"
    except (LookupError, UnicodeError):
        return True


def decoding_codec(encoding: str) -> str:
    """The codec that decodes the lines read from an input in `encoding`: UTF-8 for one
    transcoded on reading, and for UTF-8 with a mark (the reader strips the mark)."""
    return UTF8 if encoding == UTF8_BOM_NAME or transcodes(encoding) else encoding


def sniff(sample: bytes, whole: bool) -> str:
    """The encoding of a text starting with `sample` (`whole`: the sample is the whole
    text, so it may not end in the middle of a character)."""
    for bom, name in _BOMS:
        if sample.startswith(bom):
            return name
    if not sample:
        return UTF8
    nul_guess = _without_bom_utf16(sample)
    if nul_guess is not None:
        return nul_guess
    if _mostly_utf8(sample, whole):
        return UTF8
    from charset_normalizer import from_bytes

    best = from_bytes(sample, steps=16, chunk_size=4096, threshold=0.5).best()
    return UTF8 if best is None else canonical(best.encoding)


def _without_bom_utf16(sample: bytes) -> str | None:
    """UTF-16 or UTF-32 written without a mark, told by its NUL bytes: ASCII letters,
    digits and line ends each carry one (UTF-16) or three (UTF-32)."""
    head = sample[: 1 << 16]
    nuls = head.count(0)
    if nuls < _NUL_SHARE * len(head):
        return None
    if head.count(b"\x00\x00\x00") * 4 >= nuls:  # runs of three: UTF-32
        return "utf-32-le" if head[3::4].count(0) > head[0::4].count(0) else "utf-32-be"
    return "utf-16-le" if head[1::2].count(0) > head[0::2].count(0) else "utf-16-be"


def _mostly_utf8(sample: bytes, whole: bool) -> bool:
    """Whether the sample is UTF-8 but for a few bad lines (at most 1%, and some lines
    that need UTF-8's multi-byte characters are valid: a Latin-1 file whose only
    accented line is bad is no UTF-8 file)."""
    try:
        codecs.utf_8_decode(sample, "strict", whole)
        return True
    except UnicodeDecodeError:
        pass
    lines = sample.split(b"\n")
    if not whole and len(lines) > 1:
        lines.pop()  # may end inside a character
    bad = wide = 0
    for line in lines:
        if line.isascii():
            continue
        try:
            line.decode(UTF8)
            wide += 1
        except UnicodeDecodeError:
            bad += 1
    return wide > 0 and bad <= _BAD_LINE_SHARE * len(lines)


def transcoded(blocks: Iterable[bytes], encoding: str) -> Iterator[bytes]:
    """`blocks` of text in `encoding`, as blocks of UTF-8.

    A sequence `encoding` cannot decode (a lone surrogate, a last odd byte) is kept as
    bytes that are not UTF-8, so that its line is rejected rather than the input
    refused, as it would be in any other encoding."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="surrogatepass")
    for block in blocks:
        yield decoder.decode(block).encode(UTF8, "surrogatepass")
    try:
        yield decoder.decode(b"", final=True).encode(UTF8, "surrogatepass")
    except UnicodeDecodeError:
        yield b"\xff"  # a truncated last character: the last line becomes a reject
