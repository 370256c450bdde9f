"""`nmtpipe prepare` on sides whose encoding is broken or named wrong: a stray
bad line is a reject, and a named encoding the text is plainly not in stops the run
before any work, in one line that names the file and both encodings."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import FilePair, PrepareConfig
from nmtpipe.transforms.errors import InputError
from tests.helpers import IN_MEMORY, shared_lines

EN, ZH = shared_lines("ntrex128-enzh", "en"), shared_lines("ntrex128-enzh", "zh")
# The pairs whose English is ASCII, lines 0-499 of them.
ASCII_PAIRS = [(e, z) for e, z in zip(EN, ZH, strict=True) if e.isascii()][:500]


def _prepare(folder: Path, en: bytes, zh: bytes, **options) -> tuple[dict, list[dict]]:
    """Prepare the pair `en`/`zh`: its input's statistics and the pairs kept."""
    folder.mkdir()
    (folder / "c.en").write_bytes(en)
    (folder / "c.zh").write_bytes(zh)
    pair = FilePair(str(folder / "c.en"), str(folder / "c.zh"))
    out = folder / "out"
    config = PrepareConfig("en", "zh", str(out), train_pair=(pair,), **options)
    outcome = run_prepare(config, IN_MEMORY)
    kept = [
        row
        for split in outcome.manifest["splits"].values()
        for path in split["files"]
        for row in pq.read_table(out / path).to_pylist()
    ]
    (stats,) = outcome.stats["inputs"].values()
    return stats, kept


def _text(lines: list[str], encoding: str = "utf-8") -> bytes:
    return ("\n".join(lines) + "\n").encode(encoding)


def test_a_stray_bad_line_in_an_ascii_side_is_an_invalid_utf8_reject(tmp_path):
    """Before: the side was found cp1250 and the line kept as "˙ţ bad"."""
    en = [e.encode() for e, _ in ASCII_PAIRS]
    en[100] = b"\xff\xfe bad"
    zh = [z for _, z in ASCII_PAIRS]
    stats, kept = _prepare(tmp_path / "data", b"\n".join(en) + b"\n", _text(zh))
    assert stats["encoding"] == {"src": "utf-8", "tgt": "utf-8"}
    assert stats["rejects"]["invalid-utf8"] == 1
    assert 101 not in {row["line"] for row in kept}
    assert len(kept) > 400 and all(row["src"].isascii() for row in kept)  # no mojibake


def test_nul_padded_utf8_is_read_as_utf8(tmp_path):
    """Before: found UTF-32 (a crash: a code point out of range) or UTF-16 ("has 1
    lines"). Fixed-width records padded with NULs; normalisation drops the NULs."""
    en = b"".join(e.encode().ljust(400, b"\0") + b"\n" for e, _ in ASCII_PAIRS)
    stats, kept = _prepare(tmp_path / "data", en, _text([z for _, z in ASCII_PAIRS]))
    assert stats["encoding"] == {"src": "utf-8", "tgt": "utf-8"}
    source = dict(enumerate((e for e, _ in ASCII_PAIRS), start=1))
    assert len(kept) > 400 and all(row["src"] == source[row["line"]] for row in kept)


@pytest.mark.parametrize(
    ("zh", "named", "problem"),
    [
        (  # before: 437 of 1,997 pairs kept, as mojibake, and exit 0
            _text(ZH, "gb18030"),
            "big5",
            "read as big5 it is not plausible text (1,997 of 1,997 sampled lines); it reads "
            "cleanly as gb18030",
        ),
        (  # before: 28 kept
            _text(ZH),
            "gb18030",
            "read as gb18030 it is not plausible text (1,997 of 1,997 sampled lines); it "
            "reads cleanly as utf-8",
        ),
        (  # before: "c.en has 1997 lines but c.zh has 2407"
            _text(ZH, "utf-16"),
            "gb18030",
            "read as gb18030 it is not plausible text (2,385 of 2,407 sampled lines); it "
            "reads cleanly as utf-16",
        ),
    ],
    ids=["gb18030-as-big5", "utf8-as-gb18030", "utf16-as-gb18030"],
)
def test_a_named_encoding_the_side_is_plainly_not_in_stops_the_run(tmp_path, zh, named, problem):
    with pytest.raises(InputError) as error:
        _prepare(tmp_path / "data", _text(EN), zh, tgt_encoding=named)
    assert str(error.value) == f"{tmp_path}/data/c.zh: {problem}: check --tgt-encoding"
    assert not (tmp_path / "data" / "out" / "manifest.json").exists()


def test_utf16_named_for_a_side_without_a_byte_order_mark_is_one_line(tmp_path, capsys):
    """Before: a bare UnicodeError ("UTF-16 stream does not start with BOM"), traceback
    and all."""
    (tmp_path / "c.en").write_bytes(_text(EN[:50], "utf-16-le"))
    (tmp_path / "c.zh").write_bytes(_text(ZH[:50]))
    args = ["-s", "en", "-t", "zh", "--trainpref", str(tmp_path / "c"), "--src-encoding", "utf-16"]
    assert main(["prepare", *args, "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        f"nmtpipe prepare: error: {tmp_path}/c.en: read as utf-16 it has no byte-order mark "
        "to tell its byte order (name utf-16-le or utf-16-be); it reads cleanly as utf-16-le: "
        "check --src-encoding"
    )
    assert "Traceback" not in err
