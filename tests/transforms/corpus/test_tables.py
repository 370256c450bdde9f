"""Tables of pairs as Hugging Face `datasets` writes them: Parquet, JSON Lines, Arrow."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.fields import default_fields, matches, parse_fields
from nmtpipe.transforms.corpus.readers.arrow_files import TableRef
from nmtpipe.transforms.corpus.readers.jsonl import JsonLinesRef
from nmtpipe.transforms.corpus.tables import resolve_tables
from nmtpipe.transforms.errors import ConfigError, InputError
from tests.helpers import shared_lines

datasets = pytest.importorskip("datasets")

EN = shared_lines("tatoeba-cmn", "en")[3000:3050]
ZH = shared_lines("tatoeba-cmn", "zh")[3000:3050]
LANGS = ("en", "zh")


def translation_dataset():
    rows = [{"en": e, "zh": z} for e, z in zip(EN, ZH, strict=True)]
    return datasets.Dataset.from_dict({"id": list(range(len(EN))), "translation": rows})


def pairs_of(url: str, chunk_lines: int = 7, **how) -> list[tuple[int, str, str]]:
    """(record, src, tgt) of every record of the tables at `url`, through plan and load."""
    out = []
    for inp in resolve_tables(url, "train", LANGS, **how):
        for planned in registry.plan(inp, chunk_lines):
            for chunk in registry.load(planned):
                sides = chunk.src.decode().split("\n"), chunk.tgt.decode().split("\n")
                out += [(chunk.first_line + i, *p) for i, p in enumerate(zip(*sides, strict=True))]
    return out


EXPECTED = [(i + 1, e, z) for i, (e, z) in enumerate(zip(EN, ZH, strict=True))]


def test_parquet_arrow_and_json_lines_as_datasets_writes_them(tmp_path: Path):
    ds = translation_dataset()
    ds.to_parquet(str(tmp_path / "t.parquet"))
    ds.to_json(str(tmp_path / "t.jsonl"))
    ds.save_to_disk(str(tmp_path / "saved"))
    (inp,) = resolve_tables(str(tmp_path / "t.parquet"), "train", LANGS)
    assert (inp.reader, inp.fields) == ("parquet", ("translation.en", "translation.zh"))
    for url in ("t.parquet", "t.jsonl", "saved"):
        assert pairs_of(str(tmp_path / url)) == EXPECTED, url
    (saved,) = resolve_tables(str(tmp_path / "saved"), "train", LANGS)
    assert saved.src == f"{tmp_path}/saved/data-00000-of-00001.arrow" and saved.reader == "arrow"


def test_flat_columns_named_as_the_languages_and_named_fields(tmp_path: Path):
    datasets.Dataset.from_dict({"ZH": ZH, "en": EN}).to_parquet(str(tmp_path / "flat.parquet"))
    assert pairs_of(str(tmp_path / "flat.parquet")) == EXPECTED
    other = datasets.Dataset.from_dict({"source": EN, "target": ZH})
    other.to_json(str(tmp_path / "st.jsonl"))
    with pytest.raises(InputError, match=r"st\.jsonl: no fields for en and zh \(it has "
                       r"source, target\); name them with --table-columns SRC,TGT"):  # fmt: skip
        pairs_of(str(tmp_path / "st.jsonl"))
    got = pairs_of(str(tmp_path / "st.jsonl"), fields=("source", "target"))
    assert got == EXPECTED


def test_parquet_is_planned_by_row_groups_and_loaded_a_chunk_at_a_time(tmp_path: Path):
    table = pa.table({"pair": pa.array([{"en": e, "zh": z} for e, z in zip(EN, ZH, strict=True)])})
    pq.write_table(table, tmp_path / "g.parquet", row_group_size=4)
    (inp,) = resolve_tables(str(tmp_path / "g.parquet"), "train", LANGS)
    assert inp.fields == ("pair.en", "pair.zh")  # the only struct with both languages
    planned = list(registry.plan(inp, 10))
    assert all(isinstance(p.part, TableRef) for p in planned)
    assert [p.part.parts for p in planned][:2] == [(0, 3), (3, 6)]  # 12 rows: 3 groups of 4
    assert pairs_of(str(tmp_path / "g.parquet"), chunk_lines=10) == EXPECTED
    loaded = list(registry.load(planned[0]))
    assert [c.first_line for c in loaded] == [1, 11]  # 12 rows read 10 at a time
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=len(EN))  # one group
    (big,) = resolve_tables(str(tmp_path / "big.parquet"), "train", LANGS)
    (whole,) = registry.plan(big, 10)  # one ref: a ref to a part would decode all before it
    assert whole.part.parts == (0, 1) and len(list(registry.load(whole))) == 5
    assert pairs_of(str(tmp_path / "big.parquet"), chunk_lines=10) == EXPECTED


def test_nulls_and_line_breaks_in_fields(tmp_path: Path):
    table = pa.table({"en": ["a\nb", None, "c"], "zh": ["甲", "乙", None]})
    pq.write_table(table, tmp_path / "n.parquet")
    assert pairs_of(str(tmp_path / "n.parquet")) == [(1, "a b", "甲"), (2, "", "乙"), (3, "c", "")]


def test_json_lines_it_cannot_read_are_bad_records(tmp_path: Path):
    lines = [
        json.dumps({"translation": {"en": "Hi.", "zh": "嗨。"}}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"translation": {"en": 3, "zh": "三"}}),
        "",
        json.dumps({"translation": {"en": "Bye.", "zh": "再见。"}}),
    ]
    data = "\n".join(lines).encode() + b"\n" + b'{"translation": {"en": "x\xff", "zh": "y"}}\n'
    (tmp_path / "b.jsonl").write_bytes(data)
    (inp,) = resolve_tables(str(tmp_path / "b.jsonl"), "train", LANGS)
    (planned,) = registry.plan(inp, 100)
    assert isinstance(planned.part, JsonLinesRef)  # a plain local file: byte ranges
    (chunk,) = registry.load(planned)
    assert chunk.src.decode("utf-8", "replace").split("\n")[::5] == ["Hi.", "Bye."]
    assert [(u.index, u.reason, u.detail[:24]) for u in chunk.unread] == [
        (1, "bad-record", "not JSON: Expecting prop"),
        (2, "bad-record", "a JSON list, not an obje"),
        (3, "bad-record", "translation.en is a JSON"),
        (4, "bad-record", "not JSON: Expecting valu"),
        (6, "invalid-utf8", "line: invalid start byte"),
    ]


def test_what_the_driver_refuses(tmp_path: Path):
    ds = translation_dataset()
    datasets.DatasetDict({"train": ds, "validation": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ConfigError, match=r"holds the splits train, validation: give one"):
        resolve_tables(str(tmp_path / "dd"), "train", LANGS)
    (tmp_path / "t.xlsx").write_text("en,zh\n")
    with pytest.raises(ConfigError, match=r"t\.xlsx: cannot tell a table's format"):
        resolve_tables(str(tmp_path / "t.xlsx"), "train", LANGS)
    ds.to_parquet(str(tmp_path / "t.parquet"))
    with pytest.raises(InputError, match=r"no field translation\.de \(it has id, "
                       r"translation\.\{en,zh\}\)"):  # fmt: skip
        resolve_tables(str(tmp_path / "t.parquet"), "train", LANGS, fields=("translation.de", "id"))
    with pytest.raises(InputError, match=r"field id is int64, not text"):
        resolve_tables(str(tmp_path / "t.parquet"), "train", LANGS, fields=("id", "translation.en"))
    with pytest.raises(InputError, match="no files match"):
        resolve_tables(str(tmp_path / "*.arrow"), "train", LANGS)


def test_fields_and_language_codes():
    assert parse_fields(" translation.en , translation.zh ") == ("translation.en", "translation.zh")
    with pytest.raises(ConfigError, match="--table-columns wants two different fields"):
        parse_fields("en")
    assert all(matches(code, "zh") for code in ("zh", "ZH", "zh-CN", "zh_TW", "zh-Hans"))
    assert not matches("zh", "zh-TW") and not matches("zhx", "zh")
    tree = {"translation": {"zh-CN": "string", "zh-TW": "string", "en": "string"}}
    assert default_fields(tree, ("en", "zh")) is None  # two Chinese: say which
    assert default_fields(tree, ("en", "zh-tw")) == ("translation.en", "translation.zh-TW")


def test_json_nested_past_the_parser_s_depth_is_a_bad_record_first_or_later(tmp_path: Path):
    deep = "[" * 20_000 + "]" * 20_000  # shorter than a line a reader reads past
    good = json.dumps({"translation": {"en": "Hi.", "zh": "嗨。"}})
    (tmp_path / "d.jsonl").write_text("\n".join([deep, good, deep, good]) + "\n")
    assert pairs_of(str(tmp_path / "d.jsonl"), chunk_lines=100) == [
        (1, "", ""),
        (2, "Hi.", "嗨。"),
        (3, "", ""),
        (4, "Hi.", "嗨。"),
    ]
    (inp,) = resolve_tables(str(tmp_path / "d.jsonl"), "train", LANGS)
    (chunk,) = registry.load(next(registry.plan(inp, 100)))
    assert {(u.index, u.reason) for u in chunk.unread} == {(0, "bad-record"), (2, "bad-record")}
    assert chunk.unread[0].detail == "not JSON this reader takes: nested too deep"


def test_a_saved_dataset_naming_a_file_outside_its_folder_is_refused(tmp_path: Path):
    translation_dataset().save_to_disk(str(tmp_path / "saved"))
    state = tmp_path / "saved" / "state.json"
    doc = json.loads(state.read_text())
    doc["_data_files"] = [{"filename": "../../../../etc/hostname"}]
    state.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"state\.json names \.\./\.\./\.\./\.\./etc/hostname, "
                       "outside its folder"):  # fmt: skip
        resolve_tables(str(tmp_path / "saved"), "train", LANGS)
