"""Which encoding a text input is written in, and its bytes as UTF-8 where they must be.

Lines stay bytes until the cleaner decodes them one at a time, so that a line that is
not valid in its encoding is a reject and not a crash (`raw_corpus.py`). That needs the
byte `\\n` to be a line end and never part of another character: true of UTF-8 and of
every ASCII-compatible encoding (GB2312/GBK/GB18030, Big5, Shift_JIS, EUC-*, the ISO-8859
and Windows code pages), whose lines are therefore split as they are and decoded later
with their own codec. UTF-16 and UTF-32 are not: they are transcoded to UTF-8 as they are
read, a block at a time.

An input's encoding is found from its first bytes (`sniff`): a byte-order mark, else
UTF-16 or UTF-32 told by NUL bytes where the sample reads as text in it, else UTF-8 if
the sample is UTF-8 but for at most 1% of its lines (those are rejects), else what
charset-normalizer says of it. Chinese corpora of the CWMT era are GB2312, GBK or
GB18030; all three are read as GB18030, which decodes every text of the other two.

An encoding the user named is trusted only where the sample may be in it (`trusted`): one
that reads it as no text where the encoding found reads it cleanly, or that cannot decode
most of its lines, stops the run before any work, naming both.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from nmtpipe.transforms.errors import ConfigError, InputError

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
# Share of a sample's lines that may read as no text in an encoding for the sample still
# to be in it: stray corrupt lines, rejected one by one. A file is UTF-8 when no more of
# its lines are invalid UTF-8, even if those lines are its only ones that are not ASCII:
# from a few lines no detector tells one code page from another (an ASCII file with one
# Latin-1 line "café naïve" is found cp1250 or cp775, which read it "naďve", "na’ve"),
# so a line lost as a counted reject is better than one kept as a guessed code page's
# mojibake.
_BAD_LINE_SHARE = 0.01
# charset-normalizer's mess ratio over which text is not in the encoding it was read in
# (its own default threshold), and the least text it is measured on (its chunk size).
_MESS_LIMIT = 0.2
_MESS_TEXT = 512
# Share of NUL bytes that marks UTF-16 or UTF-32 written without a byte-order mark.
_NUL_SHARE = 0.1
_NO_TEXT = re.compile("[\x00\ud800-\udfff]")  # in UTF-16: a NUL or a lone surrogate


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


# Where charset-normalizer finds several single-byte encodings that read a sample equally
# well (French or German letters read the same in cp1250, cp1252, cp1257 and
# iso8859_10, but for è, which is č in cp1250), the one most text is written in.
_MOST_USED = "cp1252"


def sniff(sample: bytes, whole: bool) -> str:
    """The encoding of a text starting with `sample` (`whole`: the sample is the whole
    text, so it may not end in the middle of a character)."""
    for bom, name in _BOMS:
        if sample.startswith(bom):
            return name
    if not sample:
        return UTF8
    nul_guess = _without_bom_utf16(sample, whole)
    if nul_guess is not None:
        return nul_guess
    if _mostly_utf8(sample, whole):
        return UTF8
    from charset_normalizer import from_bytes

    found = from_bytes(sample, steps=16, chunk_size=4096, threshold=0.5)
    best = found.best()
    if best is None:
        return UTF8
    tied = {m.encoding for m in found if (m.chaos, m.coherence) == (best.chaos, best.coherence)}
    return canonical(_MOST_USED if _MOST_USED in tied else best.encoding)


def _without_bom_utf16(sample: bytes, whole: bool) -> str | None:
    """UTF-16 or UTF-32 written without a mark, told by its NUL bytes (ASCII letters,
    digits and line ends each carry one in UTF-16, three in UTF-32), where it is whole
    code units and its first 64 KiB read as text in it: UTF-8 with NULs is no UTF-16."""
    head = sample[: 1 << 16]
    nuls = head.count(0)
    if nuls < _NUL_SHARE * len(head):
        return None
    if head.count(b"\x00\x00\x00") * 4 >= nuls:  # runs of three: UTF-32
        width, guess = 4, "utf-32-le" if head[3::4].count(0) > head[0::4].count(0) else "utf-32-be"
    else:
        width, guess = 2, "utf-16-le" if head[1::2].count(0) > head[0::2].count(0) else "utf-16-be"
    if whole and len(sample) % width:
        return None
    head_whole = whole and len(head) == len(sample)
    return guess if _plausible(_reading(head, guess, head_whole)) else None


def _mostly_utf8(sample: bytes, whole: bool) -> bool:
    """Whether the sample is UTF-8 but for a few bad lines (`_BAD_LINE_SHARE`)."""
    try:
        codecs.utf_8_decode(sample, "strict", whole)
        return True
    except UnicodeDecodeError:
        pass
    lines = _sample_lines(sample, whole)
    bad = sum(not _decodes(line, UTF8) for line in lines if not line.isascii())
    return bad <= _BAD_LINE_SHARE * len(lines)


class _Reading(NamedTuple):
    """How a sample's lines read in one encoding: how many were sampled; how many tell
    encodings apart (not ASCII, or holding a NUL: every line of UTF-16 or UTF-32); how
    many of those read as no text (not decodable, NULs, or UTF-8 read as something
    else), and how many of these are not decodable at all; whether the text of the rest
    is a mess (charset-normalizer's mess ratio)."""

    lines: int
    telling: int
    garbled: int
    undecodable: int
    messy: bool


def _reading(sample: bytes, encoding: str, whole: bool) -> _Reading:
    """How the lines of `sample` read in `encoding` (`whole`: as in `sniff`)."""
    if transcodes(encoding):
        return _transcoded_reading(sample, encoding, whole)
    codec = decoding_codec(encoding)
    lines = _sample_lines(sample, whole)
    telling = garbled = undecodable = 0
    texts = []
    for line in lines:
        if line.isascii() and 0 not in line:
            continue  # the same text in every encoding that is read line by line
        telling += 1
        try:
            text = line.decode(codec)
        except UnicodeDecodeError:
            undecodable += 1
            garbled += 1
            continue
        # Text in another encoding is all but never valid UTF-8 (a Latin-1 "é" would need
        # a byte 0x80-0xBF after it): a line that is, read as something else, is mojibake.
        if "\0" in text or (codec != UTF8 and not line.isascii() and _decodes(line, UTF8)):
            garbled += 1
        else:
            texts.append(text)
    return _Reading(len(lines), telling, garbled, undecodable, _messy(texts))


def _transcoded_reading(sample: bytes, encoding: str, whole: bool) -> _Reading:
    """A sample's reading in UTF-16 or UTF-32: decoded whole, then split into lines.

    Its lines are not decodable where the sample does not decode (a code point out of
    range, an odd last byte, no byte-order mark where one names the byte order), and
    all read as no text where fewer than half its 0x0A bytes are line ends: in bytes
    read in the wrong byte order, or that are no UTF-16, a 0x0A byte pairs with its
    neighbour into another character, and the text reads as one long line."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="surrogatepass")
    n = len(_sample_lines(sample, whole))
    try:
        text = decoder.decode(sample, final=whole)
    except UnicodeError:  # not only UnicodeDecodeError: UTF-16 without its mark
        return _Reading(n, n, n, n, False)
    if 2 * text.count("\n") < sample.count(b"\n"):
        return _Reading(n, n, n, 0, False)
    lines = text.split("\n")
    if not whole and len(lines) > 1:
        lines.pop()  # may end inside a line
    if lines and not lines[-1]:
        lines.pop()
    texts = [line for line in lines if not _NO_TEXT.search(line)]
    garbled = len(lines) - len(texts)
    return _Reading(len(lines), len(lines), garbled, garbled, _messy(texts))


def _messy(texts: list[str]) -> bool:
    """Whether lines read as text are a mess to charset-normalizer: mojibake of one
    legacy encoding read as another decodes, but into unlikely letters and symbols.
    Under `_MESS_TEXT` characters, never: its ratio of a few short lines is noise (five
    lines of Big5 Chinese measure messier read as Big5 than as Korean Johab)."""
    from charset_normalizer.md import mess_ratio

    text = "\n".join(texts)
    return len(text) >= _MESS_TEXT and mess_ratio(text, _MESS_LIMIT) >= _MESS_LIMIT


def _plausible(found: _Reading) -> bool:
    """Whether a reading is clean: tidy text, but for stray lines that are rejects (1%
    of the lines, and always one: one line shows no encoding)."""
    return not found.messy and found.garbled <= max(1.0, _BAD_LINE_SHARE * found.lines)


def _misreads(found: _Reading) -> bool:
    """Whether a reading is a mess, or garbles more than stray lines: more than 1% of
    all lines, or than half of those that tell encodings apart (where those are few, as
    in English with a few accents), and more than one line."""
    strays = min(_BAD_LINE_SHARE * found.lines, found.telling / 2)
    return found.messy or found.garbled > max(1.0, strays)


def _sample_lines(sample: bytes, whole: bool) -> list[bytes]:
    """A sample's lines, less the last where it may be cut (`whole` false)."""
    lines = sample.split(b"\n")
    if not whole and len(lines) > 1:
        lines.pop()
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # after the last line end
    return lines


def _decodes(line: bytes, codec: str) -> bool:
    try:
        line.decode(codec)
        return True
    except UnicodeDecodeError:
        return False


def misread(sample: bytes, named: str, whole: bool) -> str | None:
    """Why a text starting with `sample` is plainly not in the encoding `named`, or None.

    Plainly not: it reads as no text in `named` (`_misreads`) where the encoding `sniff`
    finds reads it cleanly and better; or `named` cannot decode most of its lines; or it
    is UTF-16 or UTF-32 without the byte-order mark that tells their byte order. An
    encoding that reads the sample as plausible text is never second-guessed: from a
    few lines, the detector's own guess can be the wrong one."""
    mine = _reading(sample, named, whole)
    if not _misreads(mine):  # an empty text, too, in any encoding
        return None
    found = sniff(sample, whole)
    theirs = None if _same(found, named) else _reading(sample, found, whole)
    clean = (
        theirs is not None and _plausible(theirs) and (mine.messy or theirs.garbled < mine.garbled)
    )
    elsewhere = f"; it reads cleanly as {found}" if clean else ""
    if named in ("utf-16", "utf-32") and not any(
        sample.startswith(bom) and name == named for bom, name in _BOMS
    ):
        return (
            f"read as {named} it has no byte-order mark to tell its byte order (name "
            f"{named}-le or {named}-be){elsewhere}"
        )
    if clean:
        shown = mine.telling if mine.messy else mine.garbled  # a mess as a whole, or lines
        return (
            f"read as {named} it is not plausible text ({shown:,} of {mine.lines:,} sampled "
            f"lines){elsewhere}"
        )
    if 2 * mine.undecodable > mine.lines:
        return (
            f"read as {named}, {mine.undecodable:,} of {mine.lines:,} sampled lines are not {named}"
        )
    return None


def _same(one: str, other: str) -> bool:
    """Whether two encodings read an input alike (UTF-8 with and without a mark do)."""
    return one == other or {one, other} <= {UTF8, UTF8_BOM_NAME}


def trusted(url: str, named: str, sample: bytes, whole: bool, option: str) -> str:
    """`named`, the encoding given by `option` for the file at `url` whose first bytes
    are `sample`; InputError where the sample is plainly not in it (`misread`)."""
    problem = misread(sample, named, whole)
    if problem:
        raise InputError(f"{url}: {problem}: check {option}")
    return named


def alignment_hint(found: tuple[str, ...]) -> str:
    """Words for a message about two sides' line counts that differ, where an encoding may
    be why: a side read in an encoding other than its own splits into other lines."""
    if all(name in (UTF8, UTF8_BOM_NAME) for name in found):
        return ""
    return (
        f" (read as {' and '.join(found)}: a side read in an encoding not its own splits "
        "into other lines; name it with --src-encoding/--tgt-encoding)"
    )


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
