"""`prepare` on the corpora users bring, as downloaded: T2T's archives (the bundled
recipe), WMT's SGML, CWMT's names and encodings, Hugging Face datasets, OPUS's zip
archives and TMX; the same bytes on every runner; an input read wrong refused."""

from __future__ import annotations

import gzip
import json
import sys
import tarfile
import zipfile
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.workflow import prepare_plan
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import (
    FilePair,
    PrepareConfig,
    ReaderOptions,
    make_plan,
)
from nmtpipe.transforms.corpus.inputs import brace_pair
from nmtpipe.transforms.corpus.readers.csv_table import CsvConfig
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.text.zh_script import ScriptConverter
from tests.helpers import (
    DEV_PAIR,
    GB18030_MEMBER,
    IN_MEMORY,
    MULTI_PROCESS,
    command_result,
    sgml_set,
    shared_lines,
    t2t_enzh_archives,
    write_pair,
    write_tgz,
)

datasets = pytest.importorskip("datasets")
EN, ZH = shared_lines("tatoeba-cmn", "en"), shared_lines("tatoeba-cmn", "zh")


def test_the_t2t_enzh_recipe_reads_its_archives_as_downloaded(tmp_path, capsys, monkeypatch):
    """`nmtpipe run --example t2t-enzh` on miniature archives with T2T's member names: a
    GB18030 Chinese side with CRLF ends, SGML as the validation set, no encoding flag."""
    data = tmp_path / "t2t_datagen"
    sizes = t2t_enzh_archives(data)
    monkeypatch.chdir(tmp_path)  # the recipe's root is relative
    argv = ["run", "--example", "t2t-enzh", "--set", f"data={data}", "--until", "prepare"]
    assert main(argv) == 0
    out, report = capsys.readouterr()
    (step, *_) = command_result(out)["steps"]
    stats = step["results"][0]["stats"]
    archive = {"cwmt": "cwmt.tgz", "dev": "dev.tgz", "training-parallel-nc-v13": "training-"
               "parallel-nc-v13.tgz"}  # fmt: skip
    origins = {}
    for (src, tgt), n in sizes.items():
        where = data / archive[src.split("/")[0]]
        origin = brace_pair(f"tar://{src}::{where}", f"tar://{tgt}::{where}")
        origins[(src, tgt)] = origin
        assert stats["inputs"][origin]["read"] == n, origin  # every input read in full
        assert origin in report  # and reported by name
    assert len(stats["inputs"]) == len(sizes) == 26
    neu = next(o for (_, tgt), o in origins.items() if tgt == GB18030_MEMBER)
    assert stats["inputs"][neu]["encoding"] == {"src": "utf-8", "tgt": "gb18030"}
    assert "gb18030" in report
    prepared = tmp_path / "runs/t2t-enzh/prepared"
    doc = json.loads((prepared / "manifest.json").read_text())
    recorded = {i["origin"]: i["encoding"] for i in doc["inputs"]}
    assert recorded[neu] == {"src": "utf-8", "tgt": "gb18030"}
    valid = pq.read_table(prepared / doc["splits"]["valid"]["files"][0]).to_pylist()
    assert {r["origin"] for r in valid} == {origins[DEV_PAIR]}  # the SGML set alone
    assert len(valid) == sizes[DEV_PAIR]  # a reference set is kept whole
    ntrex = shared_lines("ntrex128-enzh", "en")
    assert sorted(r["src"] for r in valid) == sorted(ntrex[: sizes[DEV_PAIR]])  # unescaped
    train = pq.read_table(prepared / doc["splits"]["train"]["files"][0]).to_pylist()
    with tarfile.open(data / "cwmt.tgz") as tar:
        member = tar.extractfile(GB18030_MEMBER)
        assert member is not None
        as_written = member.read().decode("gb18030").split("\r\n")
    simplified, _ = ScriptConverter("simplified")(as_written)  # the recipe's zh_script
    read_neu = [r for r in train if r["origin"] == neu]
    assert len(read_neu) > 250
    assert all(r["tgt"] == simplified[r["line"] - 1] for r in read_neu)  # no CR, no mojibake


def _every_layout(folder: Path) -> PrepareConfig:
    """One prepare over a file of each layout: Parquet with the translation struct, JSON
    Lines, a CSV (a line break and commas in quoted fields), a TMX, a zip member pair
    (OPUS), a UTF-16 pair, a GB18030 pair with CRLF, and an SGML validation set."""
    folder.mkdir()
    part = iter(range(0, 3000, 200))

    def lines() -> tuple[list[str], list[str]]:
        at = next(part)
        return EN[at : at + 200], ZH[at : at + 200]

    en, zh = lines()
    rows = [{"en": e, "zh": z} for e, z in zip(en, zh, strict=True)]
    datasets.Dataset.from_dict({"translation": rows}).to_parquet(str(folder / "hf.parquet"))
    en, zh = lines()
    datasets.Dataset.from_dict({"en": en, "zh": zh}).to_json(str(folder / "hf.jsonl"))
    en, zh = lines()
    table = pa.table({"en": en, "zh": zh})
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(str(folder / "batches.arrow"), table.schema, options=options) as w:
        w.write_table(table, max_chunksize=25)  # planned as ranges of record batches
    en, zh = lines()
    en[0] = 'Two lines,\n"quoted", and commas.'
    csv = datasets.Dataset.from_dict({"en": en, "zh": zh})
    csv.to_csv(str(folder / "hf.csv"), index=False, sep=";")  # read with --csv-delimiter
    en, zh = lines()
    units = "".join(
        f'<tu><tuv xml:lang="en-GB"><seg>{e}</seg></tuv><tuv xml:lang="zh-CN"><seg>{z}</seg>'
        "</tuv></tu>\n"
        for e, z in zip(en, zh, strict=True)
        if "&" not in e + z and "<" not in e + z
    )
    (folder / "opus.tmx").write_text(f'<tmx version="1.4"><body>\n{units}</body></tmx>\n')
    en, zh = lines()
    with zipfile.ZipFile(folder / "en-zh.txt.zip", "w") as z:
        z.writestr("Corpus.en-zh.en", "\n".join(en) + "\n")
        z.writestr("Corpus.en-zh.zh", "\n".join(zh) + "\n")
    en, zh = lines()
    (folder / "u16.en").write_bytes(("\n".join(en) + "\n").encode("utf-16"))
    (folder / "u16.zh").write_bytes(("\n".join(zh) + "\n").encode("utf-16"))
    en, zh = lines()
    (folder / "cwmt_en.txt").write_bytes(("\r\n".join(en) + "\r\n").encode())
    (folder / "cwmt_cn.txt").write_bytes(("\r\n".join(zh) + "\r\n").encode("gb18030"))
    dev_en, dev_zh = (
        shared_lines("ntrex128-enzh", "en")[:40],
        shared_lines("ntrex128-enzh", "zh")[:40],
    )
    docs = shared_lines("ntrex128-enzh", "docid")[:40]
    (folder / "dev-src.en.sgm").write_bytes(sgml_set(dev_en, docs, "en", ref=False))
    (folder / "dev-ref.zh.sgm").write_bytes(sgml_set(dev_zh, docs, "zh", ref=True))
    f = str(folder)
    return PrepareConfig(
        "en",
        "zh",
        output="",
        table=tuple(f"{f}/{name}" for name in ("hf.parquet", "hf.jsonl", "batches.arrow",
                                               "hf.csv", "opus.tmx")),
        train_pair=(
            FilePair(f"zip://Corpus.en-zh.en::{f}/en-zh.txt.zip", f"zip://Corpus.en-zh.zh::{f}/en-zh.txt.zip"),
            FilePair(f"{f}/u16.en", f"{f}/u16.zh"),
            FilePair(f"{f}/cwmt_en.txt", f"{f}/cwmt_cn.txt"),
        ),
        valid_pair=(FilePair(f"{f}/dev-src.en.sgm", f"{f}/dev-ref.zh.sgm"),),
        num_shards=2,
        chunk_lines=64,
        readers=ReaderOptions(csv=CsvConfig(csv_delimiter=";")),
    )  # fmt: skip


def test_every_layout_in_one_run_gives_the_same_bytes_on_every_runner(tmp_path):
    config = _every_layout(tmp_path / "data")
    digests = {}
    for name, runner in (("in-memory", IN_MEMORY), ("processes", MULTI_PROCESS)):
        out = str(tmp_path / name)
        outcome = run_prepare(PrepareConfig(**{**config.__dict__, "output": out}), runner)
        digests[name] = {f["path"]: f["sha256"] for f in outcome.manifest["files"]}
        inputs = outcome.stats["inputs"]
        assert len(inputs) == 9 and all(i["kept"] > 0.9 * i["read"] for i in inputs.values())
        encodings = {o.rsplit("/", 1)[-1]: i["encoding"] for o, i in inputs.items()}
        assert encodings["u16.{en,zh}"] == {"src": "utf-16", "tgt": "utf-16"}
        assert encodings["cwmt_{en,cn}.txt"] == {"src": "utf-8", "tgt": "gb18030"}
        assert outcome.stats["splits"]["valid"] == 40
    assert digests["in-memory"] == digests["processes"]


def test_a_tmx_in_another_encoding_is_recorded_in_it(tmp_path):
    """The statistics and the manifest name the encoding a TMX was read in (GBK, read as
    GB18030 as a text file would be), not the UTF-8 it was parsed in."""
    units = "".join(
        f'<tu><tuv xml:lang="en"><seg>{e}</seg></tuv><tuv xml:lang="zh"><seg>{z}</seg></tuv></tu>\n'
        for e, z in zip(EN[:300], ZH[:300], strict=True)
        if "&" not in e + z and "<" not in e + z
    )
    head = '<?xml version="1.0" encoding="GBK"?>\n<tmx version="1.4"><body>\n'
    text = (head + units + "</body></tmx>\n").encode("gb18030")
    (tmp_path / "gbk.tmx").write_bytes(text)
    config = PrepareConfig("en", "zh", str(tmp_path / "out"), table=(str(tmp_path / "gbk.tmx"),))
    outcome = run_prepare(config, IN_MEMORY)
    (info,) = outcome.stats["inputs"].values()
    assert info["encoding"] == {"src": "gb18030", "tgt": "gb18030"}
    assert info["kept"] > 0.9 * info["read"]
    (found,) = outcome.manifest["inputs"]
    assert found["encoding"] == {"src": "gb18030", "tgt": "gb18030"}


def test_an_input_that_keeps_no_pairs_stops_the_run_naming_it(tmp_path):
    (tmp_path / "c_en.txt").write_text("\n".join(EN[:50]) + "\n", encoding="utf-8")
    (tmp_path / "c_cn.txt").write_bytes(("\n".join(ZH[:50]) + "\n").encode("gb18030"))
    pair = FilePair(str(tmp_path / "c_en.txt"), str(tmp_path / "c_cn.txt"))
    config = PrepareConfig(
        "en", "zh", str(tmp_path / "out"), train_pair=(pair,), tgt_encoding="utf-8"
    )
    with pytest.raises(InputError) as error:
        run_prepare(config, IN_MEMORY)
    assert str(error.value) == (  # before any work: the side is plainly not UTF-8
        f"{tmp_path}/c_cn.txt: read as utf-8 it is not plausible text (50 of 50 sampled "
        "lines); it reads cleanly as gb18030: check --tgt-encoding"
    )
    assert not (tmp_path / "out" / "manifest.json").exists()
    found = run_prepare(
        PrepareConfig("en", "zh", str(tmp_path / "out"), train_pair=(pair,)), IN_MEMORY
    )
    assert found.stats["pairs_kept"] > 40  # found by itself: GB18030


@pytest.mark.parametrize("layout", ["files", "tmx", "missing archive"])
def test_an_input_without_pairs_commits_nothing(tmp_path, layout):
    """Empty files or a TMX without units (a download that failed) are refused, never
    committed as an empty dataset; a missing archive is named, before any work."""
    config = {"src_lang": "en", "tgt_lang": "zh", "output": str(tmp_path / "out")}
    if layout == "files":
        write_pair(tmp_path / "e", b"", b"")
        config["trainpref"] = (str(tmp_path / "e"),)
        said = f"{tmp_path}/e.{{en,zh}}: no pairs in it (empty?); nothing committed"
    elif layout == "tmx":
        (tmp_path / "e.tmx").write_text('<tmx version="1.4"><header/><body></body></tmx>\n')
        config["table"] = (str(tmp_path / "e.tmx"),)
        said = f"{tmp_path}/e.tmx: no pairs in it (empty?); nothing committed"
    else:
        member = f"tar://cwmt/x.en::{tmp_path}/cwmt.tgz"
        config["train_pair"] = (FilePair(member, member.replace("x.en", "x.zh")),)
        said = f"no such file: {tmp_path}/cwmt.tgz, the archive of {member}"
    with pytest.raises(InputError) as error:
        run_prepare(PrepareConfig(**config), IN_MEMORY)
    assert str(error.value) == said
    assert not (tmp_path / "out").exists()


class _LocalHub(DirFileSystem):
    """The Hub's `hf://datasets/OWNER/NAME/PATH`, served from a local folder (`root`)."""

    protocol = "hf"
    root = ""

    def __init__(self, **options):
        super().__init__(path=self.root, fs=LocalFileSystem(), **options)


@pytest.fixture
def local_hub(tmp_path, monkeypatch):
    """`hf://` served by a local folder in this process, in place of huggingface_hub's
    filesystem (which the `hf` extra installs, and fsspec finds by the same name)."""
    real = fsspec.get_filesystem_class("hf")
    assert real.__module__.startswith("huggingface_hub")
    _LocalHub.root = str(tmp_path / "hub")
    monkeypatch.setitem(sys.modules["fsspec.registry"]._registry, "hf", _LocalHub)
    yield Path(_LocalHub.root)
    _LocalHub.clear_instance_cache()


def test_hugging_face_hub_urls_and_their_identity(local_hub, tmp_path):
    folder = local_hub / "datasets/Helsinki-NLP/opus-100/en-zh"
    folder.mkdir(parents=True)
    for split, at in (("train", 0), ("validation", 400)):
        rows = [
            {"en": e, "zh": z} for e, z in zip(EN[at : at + 300], ZH[at : at + 300], strict=True)
        ]
        ds = datasets.Dataset.from_dict({"translation": rows})
        ds.to_parquet(str(folder / f"{split}-00000-of-00001.parquet"))
    hub = "hf://datasets/Helsinki-NLP/opus-100/en-zh"
    config = PrepareConfig(
        "en", "zh", str(tmp_path / "out"), table=(f"{hub}/train-*.parquet",),
        valid_table=(f"{hub}/validation-00000-of-00001.parquet",),
    )  # fmt: skip
    outcome = run_prepare(config, IN_MEMORY)
    inputs = outcome.stats["inputs"]
    assert inputs[f"{hub}/train-00000-of-00001.parquet"]["read"] == 300
    assert inputs[f"{hub}/validation-00000-of-00001.parquet"]["read"] == 300
    plan = make_plan(config)
    train, _ = plan.identities
    assert train["layout"] == "parquet" and train["fields"] == ["translation.en", "translation.zh"]
    assert train["files"][0]["url"] == f"{hub}/train-00000-of-00001.parquet"
    before = plan.fingerprint
    ds.to_parquet(str(folder / "train-00000-of-00001.parquet"))  # a new revision of the file
    assert make_plan(config).fingerprint != before


def test_refresh_sees_a_changed_table_or_pair_member_and_nothing_else(tmp_path, capsys):
    """refresh's input fingerprints cover tables and archive members (size and version)."""
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [{"en": e, "zh": z} for e, z in zip(EN[:200], ZH[:200], strict=True)]
    datasets.Dataset.from_dict({"translation": rows}).to_parquet(str(raw / "hf.parquet"))
    with zipfile.ZipFile(raw / "opus.zip", "w") as z:
        z.writestr("O.en", "\n".join(EN[200:400]) + "\n")
        z.writestr("O.zh", "\n".join(ZH[200:400]) + "\n")
    doc = {
        "root": str(tmp_path / "root"),
        "beam": IN_MEMORY,
        "prepare": {"src_lang": "en", "tgt_lang": "zh", "table": [f"{raw}/hf.parquet"],
                    "train_pair": [[f"zip://O.en::{raw}/opus.zip", f"zip://O.zh::{raw}/opus.zip"]]},
    }  # fmt: skip
    path = tmp_path / "refresh.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    until = ["refresh", str(path), "--until", "prepare"]
    assert main(until) == 0
    assert command_result(capsys.readouterr().out)["prepared"] == 2
    assert main(until) == 0  # nothing changed: both parts kept
    assert command_result(capsys.readouterr().out)["prepared"] == 0
    more = [{"en": e, "zh": z} for e, z in zip(EN[:210], ZH[:210], strict=True)]
    datasets.Dataset.from_dict({"translation": more}).to_parquet(str(raw / "hf.parquet"))
    assert main(until) == 0
    assert command_result(capsys.readouterr().out)["prepared"] == 1  # the pair's part kept


def _member_pairs(pairs: int, lines: int) -> dict[str, bytes]:
    """`c/pK.en` and `c/pK.zh` for K < `pairs`, `lines` lines each."""
    members = {}
    for k in range(pairs):
        at = slice(k * lines, (k + 1) * lines)
        members[f"c/p{k}.en"] = ("\n".join(EN[at]) + "\n").encode()
        members[f"c/p{k}.zh"] = ("\n".join(ZH[at]) + "\n").encode()
    return members


def test_archive_members_are_planned_as_the_same_text_in_plain_files(tmp_path, monkeypatch):
    """An archive member's estimate is its size in its archive's index (each archive
    read once), as a plain file's is its size: the same estimate, the same shards."""
    monkeypatch.setattr(prepare_plan, "AUTO_SHARD_BYTES", 64 << 10)
    read = []
    member_sizes = prepare_plan.archives.member_sizes
    monkeypatch.setattr(
        prepare_plan.archives,
        "member_sizes",
        lambda *args: read.append(args[:2]) or member_sizes(*args),
    )
    members = _member_pairs(5, 1000)
    for name, data in members.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    write_tgz(tmp_path / "t.tgz", members)
    with zipfile.ZipFile(tmp_path / "o.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    prefixes = [f"c/p{k}" for k in range(5)]

    def plan(**inputs):
        return make_plan(PrepareConfig("en", "zh", str(tmp_path / "out"), **inputs))

    plain = plan(trainpref=tuple(str(tmp_path / p) for p in prefixes))
    tgz = plan(trainpref=tuple(f"tar://{p}::{tmp_path}/t.tgz" for p in prefixes))
    zipped = plan(
        train_pair=tuple(
            FilePair(f"zip://{p}.en::{tmp_path}/o.zip", f"zip://{p}.zh::{tmp_path}/o.zip")
            for p in prefixes
        )
    )
    assert read == [("tar", f"{tmp_path}/t.tgz"), ("zip", f"{tmp_path}/o.zip")]
    assert plain.input_bytes == sum(map(len, members.values()))
    assert tgz.input_bytes == zipped.input_bytes == plain.input_bytes
    assert plain.shard_counts()["train"] > 1
    assert tgz.shard_counts() == zipped.shard_counts() == plain.shard_counts()
    # A compressed member's index tells its compressed size: estimated as the same file's.
    gz = {f"g/p0.{lang}.gz": gzip.compress(members[f"c/p0.{lang}"]) for lang in ("en", "zh")}
    (tmp_path / "g").mkdir()
    for name, data in gz.items():
        (tmp_path / name).write_bytes(data)
    with zipfile.ZipFile(tmp_path / "gz.zip", "w") as z:
        for name, data in gz.items():
            z.writestr(name, data)
    write_tgz(tmp_path / "gz.tgz", gz)
    as_files = plan(trainpref=(str(tmp_path / "g/p0"),)).input_bytes
    assert as_files == prepare_plan.COMPRESSION_FACTOR * sum(map(len, gz.values()))
    for kind, archive in (("tar", "gz.tgz"), ("zip", "gz.zip")):
        pair = FilePair(*(f"{kind}://{name}::{tmp_path}/{archive}" for name in gz))
        assert plan(train_pair=(pair,)).input_bytes == as_files


def test_an_index_is_believed_as_far_as_the_archive_could_inflate(tmp_path, monkeypatch):
    archive = write_tgz(tmp_path / "t.tgz", _member_pairs(1, 10))
    forged = {"c/p0.en": 1 << 60, "c/p0.zh": 1 << 60}
    monkeypatch.setattr(prepare_plan.archives, "member_sizes", lambda *args: forged)
    config = PrepareConfig("en", "zh", str(tmp_path / "out"), trainpref=(f"tar://c/p0::{archive}",))
    most = 2 * archive.stat().st_size * prepare_plan.MAX_INFLATION
    assert make_plan(config).input_bytes == most


def test_a_reader_s_option_on_the_command_line(tmp_path, capsys):
    rows = "".join(f"{e};{z}\n" for e, z in zip(EN[:200], ZH[:200], strict=True) if ";" not in e)
    (tmp_path / "s.csv").write_text("en;zh\n" + rows, encoding="utf-8")
    argv = ["prepare", "-s", "en", "-t", "zh", "--table", str(tmp_path / "s.csv"),
            "--output", str(tmp_path / "out"), "--scorers", "none", "--json"]  # fmt: skip
    assert main([*argv, "--csv-delimiter", "semicolon"]) == 0
    (found,) = command_result(capsys.readouterr().out)["stats"]["inputs"].values()
    assert found["read"] == rows.count("\n") and found["kept"] > 0.9 * found["read"]
    with pytest.raises(SystemExit) as usage:
        main([*argv, "--csv-delimiter", "ab"])
    assert usage.value.code == 2
    assert "a CSV delimiter is one character" in capsys.readouterr().err
