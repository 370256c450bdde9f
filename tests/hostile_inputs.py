"""A test bed of hostile and broken inputs for every corpus reader: each case writes its
files and says what `nmtpipe prepare` must make of them (one error line, or rejects),
beside a clean input of the same size for the same reader, whose time and memory bound
the case's (`tests/pipelines/workflow/test_hostile_inputs.py`; docs/guides/errors.md
has the table).

    python -m tests.hostile_inputs FOLDER     # write every case's files there
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import sys
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import example_lines

SIZE = 2 << 20  # bytes of a clean input
PAYLOAD = 256 << 20  # bytes a hostile compressed input inflates to
LONG_LINE = 32 << 20  # bytes of a plain file's one long line
EN = example_lines("tatoeba-cmn", "en", 2000)
ZH = example_lines("tatoeba-cmn", "zh", 2000)


@dataclass(frozen=True)
class Case:
    """A hostile input: its reader, what writes its files into a folder and returns the
    prepare arguments that read them, and what prepare must say (`error`: the last line
    of stderr, a regular expression) or reject (`rejects`: reason → count)."""

    name: str
    reader: str
    write: Callable[[Path], list[str]]
    error: str | None = None
    rejects: dict[str, int] | None = None


def _lines(n_bytes: int, lines: list[str]) -> bytes:
    """Lines repeated until `n_bytes`, whole lines."""
    out, size = [], 0
    for line in itertools.cycle(lines):
        data = (line + "\n").encode()
        if size + len(data) > n_bytes:
            break
        out.append(data)
        size += len(data)
    return b"".join(out)


def _pair(n_bytes: int) -> tuple[bytes, bytes]:
    """A clean pair of about `n_bytes` on its English side, line-aligned."""
    en = _lines(n_bytes, EN)
    count = en.count(b"\n")
    zh = b"".join((z + "\n").encode() for z in itertools.islice(itertools.cycle(ZH), count))
    return en, zh


def _files(folder: Path, **named: bytes) -> None:
    for name, data in named.items():
        (folder / name.replace("_", ".")).write_bytes(data)


def _tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, data in members.items():
            z.writestr(name, data)


def _lines_args(prefix: Path) -> list[str]:
    return ["--trainpref", str(prefix)]


def _members_args(kind: str, archive: Path) -> list[str]:
    return ["--train-pair", f"{kind}://c.en::{archive}", f"{kind}://c.zh::{archive}"]


# Clean inputs of the hostile ones' size, one per reader.
def clean_plain(folder: Path) -> list[str]:
    en, zh = _pair(SIZE)
    _files(folder, c_en=en, c_zh=zh)
    return _lines_args(folder / "c")


def clean_gz(folder: Path) -> list[str]:
    en, zh = _pair(SIZE)
    _files(folder, c_en_gz=gzip.compress(en, 1), c_zh_gz=gzip.compress(zh, 1))
    return _lines_args(folder / "c")


def clean_tar(folder: Path) -> list[str]:
    en, zh = _pair(SIZE)
    _tar(folder / "c.tgz", {"c.en": en, "c.zh": zh})
    return _members_args("tar", folder / "c.tgz")


def clean_zip(folder: Path) -> list[str]:
    en, zh = _pair(SIZE)
    _zip(folder / "c.zip", {"c.en": en, "c.zh": zh})
    return _members_args("zip", folder / "c.zip")


def clean_jsonl(folder: Path) -> list[str]:
    rows = (json.dumps({"translation": {"en": e, "zh": z}}) for e, z in zip(EN, ZH, strict=True))
    (folder / "c.jsonl").write_bytes(_lines(SIZE, list(rows)))
    return ["--table", str(folder / "c.jsonl")]


CLEAN = {
    "plain": clean_plain,
    "gz": clean_gz,
    "tar": clean_tar,
    "zip": clean_zip,
    "jsonl": clean_jsonl,
}


# The hostile ones.
def no_newline_gz(folder: Path) -> list[str]:
    """Compressed streams without a line end: one line of all their bytes."""
    nuls = gzip.compress(b"\0" * PAYLOAD, 9)
    _files(folder, c_en_gz=nuls, c_zh_gz=nuls)
    return _lines_args(folder / "c")


def long_line_plain(folder: Path) -> list[str]:
    """A clean pair with one line of most of the file's bytes among its lines."""
    en, zh = (side.splitlines(keepends=True) for side in _pair(SIZE))
    half = len(en) // 2
    en.insert(half, b"x" * LONG_LINE + b"\n")
    zh.insert(half, "长\n".encode())
    _files(folder, c_en=b"".join(en), c_zh=b"".join(zh))
    return _lines_args(folder / "c")


def long_line_tar(folder: Path) -> list[str]:
    """A tar member of one line of NULs, beside a clean one of as many lines."""
    _tar(folder / "c.tgz", {"c.en": b"\0" * PAYLOAD + b"\n", "c.zh": "零\n".encode()})
    return _members_args("tar", folder / "c.tgz")


def zip_bomb(folder: Path) -> list[str]:
    """A zip member that inflates a thousandfold into one line."""
    _zip(folder / "c.zip", {"c.en": b"\0" * PAYLOAD, "c.zh": b"\0" * PAYLOAD})
    return _members_args("zip", folder / "c.zip")


def deep_json(folder: Path) -> list[str]:
    """JSON Lines whose records nest past any parser's depth, among clean ones."""
    deep = "[" * 30_000 + "]" * 30_000
    rows = [json.dumps({"translation": {"en": e, "zh": z}}) for e, z in zip(EN, ZH, strict=True)]
    (folder / "c.jsonl").write_text("\n".join([deep, *rows[:500], deep, *rows[500:]]) + "\n")
    return ["--table", str(folder / "c.jsonl")]


def traversal_member(folder: Path) -> list[str]:
    """A member named to climb out of its archive."""
    _tar(folder / "c.tgz", {"c.en": b"Hi.\n", "c.zh": "嗨。\n".encode()})
    return [
        "--train-pair",
        f"tar://../../etc/passwd::{folder}/c.tgz",
        f"tar://c.zh::{folder}/c.tgz",
    ]


def _sgml(folder: Path, close: str) -> list[str]:
    """A WMT SGML pair of 5,000 segments, each ended by `close`."""
    for lang, lines in (("en", EN), ("zh", ZH)):
        segs = "".join(f'<seg id="{i}">{lines[i % len(lines)]}{close}\n' for i in range(1, 5001))
        doc = f'<srcset setid="s" srclang="en">\n<doc docid="d" sysid="ref">\n{segs}</doc>\n'
        (folder / f"c.{lang}.sgm").write_text(doc + "</srcset>\n", encoding="utf-8")
    return ["--train-pair", str(folder / "c.en.sgm"), str(folder / "c.zh.sgm")]


def _tmx(folder: Path, units: list[str], prolog: str = "") -> list[str]:
    """A TMX of `units`, after the XML declaration and `prolog` (a DOCTYPE)."""
    head = f'<?xml version="1.0" encoding="utf-8"?>\n{prolog}<tmx version="1.4"><header/><body>\n'
    body = "\n".join(units)
    (folder / "c.tmx").write_text(head + body + "\n</body></tmx>\n", encoding="utf-8")
    return ["--table", str(folder / "c.tmx")]


def _unit(en: str, zh: str) -> str:
    return (
        f'<tu><tuv xml:lang="en"><seg>{en}</seg></tuv><tuv xml:lang="zh"><seg>{zh}</seg></tuv></tu>'
    )


def unclosed_segments(folder: Path) -> list[str]:
    """A WMT SGML pair whose 5,000 segments have lost their `</seg>` (quadratic to any
    reader that looks for it from each `<seg>`)."""
    return _sgml(folder, "")


def huge_unit(folder: Path) -> list[str]:
    """A TMX whose one unit holds 32 MB, among clean ones."""
    units = [_unit(e, z) for e, z in zip(EN, ZH, strict=True)]
    huge = '<tu><tuv xml:lang="en"><seg>' + "x" * LONG_LINE + "</seg></tuv></tu>"
    return _tmx(folder, [*units[:1000], huge, *units[1000:]])


def entity_bomb(folder: Path) -> list[str]:
    """A TMX declaring entities that would expand to gigabytes ("billion laughs")."""
    entities = ['<!ENTITY a "' + "a" * 80 + '">']
    for name, inner in zip("bcdefghij", "abcdefghi", strict=True):
        entities.append(f'<!ENTITY {name} "' + f"&{inner};" * 10 + '">')
    doctype = "<!DOCTYPE tmx [\n" + "\n".join(entities) + "\n]>\n"
    return _tmx(folder, [_unit("&j;", "嗨")], doctype)


def wrong_encoding_named(folder: Path) -> list[str]:
    """A GB18030 side named Big5: read as named, it would be kept as mojibake."""
    en, zh = _pair(SIZE)
    _files(folder, c_en=en, c_zh=zh.decode().encode("gb18030"))
    return [*_lines_args(folder / "c"), "--tgt-encoding", "big5"]


def clean_sgml(folder: Path) -> list[str]:
    return _sgml(folder, "</seg>")


def clean_tmx(folder: Path) -> list[str]:
    return _tmx(folder, [_unit(e, z) for e, z in zip(EN, ZH, strict=True)])


CLEAN |= {"sgml": clean_sgml, "tmx": clean_tmx}


CASES = [
    Case("a compressed stream without a line end", "gz", no_newline_gz,
         error=r"none of its 1 pairs kept .*rejected: too-long 1\); lines end at LF"),
    Case("a line of 32 MB among clean lines", "plain", long_line_plain, rejects={"too-long": 1}),
    Case("a tar member of one line of 256 MB", "tar", long_line_tar,
         error=r"none of its 1 pairs kept .*too-long 1"),
    Case("a zip member inflating a thousandfold into one line", "zip", zip_bomb,
         error=r"none of its 1 pairs kept .*too-long 1"),
    Case("JSON nested 30,000 deep", "jsonl", deep_json, rejects={"bad-record": 2}),
    Case("an archive member named ../../etc/passwd", "tar", traversal_member,
         error=r"c\.tgz has no member \.\./\.\./etc/passwd"),
    Case("5,000 SGML segments without </seg>", "sgml", unclosed_segments,
         error=r'c\.en\.sgm: line 3: <seg id="?1"?> has no </seg> before the <seg id="?2"?>'),
    Case("a TMX unit of 32 MB", "tmx", huge_unit, rejects={"too-long": 1}),
    Case("a TMX entity bomb", "tmx", entity_bomb, error=r"c\.tmx: not a well-formed TMX"),
    Case("a GB18030 side named Big5", "plain", wrong_encoding_named,
         error=r"c\.zh: read as big5 it is not plausible text .* it reads cleanly as gb18030: "
               r"check --tgt-encoding"),
]  # fmt: skip


def main(folder: str) -> None:
    root = Path(folder)
    for k, case in enumerate(CASES):
        where = root / f"{k:02d}"
        where.mkdir(parents=True, exist_ok=True)
        print(where, case.name, " ".join(case.write(where)))


if __name__ == "__main__":
    main(sys.argv[1])
