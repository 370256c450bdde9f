"""`prepare` end to end on real runners and real storage: outputs, caching, identity."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.transforms.errors import OutputError
from nmtpipe.transforms.storage import manifest
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.filters import REASONS
from tests.helpers import IN_MEMORY, MULTI_PROCESS, example_lines, write_pair


def prepare(corpus: Path, output, beam_args=IN_MEMORY, **kwargs):
    force = kwargs.pop("force", False)
    config = PrepareConfig(
        src_lang="en", tgt_lang="zh", output=str(output), trainpref=(str(corpus),), **kwargs
    )
    return run_prepare(config, list(beam_args), force=force)


def file_hashes(outcome, skip_origins: bool = False) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in outcome.manifest["files"]}


def read_split(output: str, outcome, split: str) -> list[dict]:
    rows = []
    for path in outcome.manifest["splits"][split]["files"]:
        rows += pq.read_table(f"{output}/{path}").to_pylist()
    return rows


def test_outputs_account_for_every_line(small_corpus, tmp_path):
    out = tmp_path / "prepared"
    outcome = prepare(small_corpus, out, num_shards=2, valid_fraction=0.1, test_fraction=0.1)
    doc = manifest.read_manifest(str(out), "nmtpipe.prepare")
    manifest.verify_files(str(out), doc, checksums=True)
    stats = json.loads((out / "stats.json").read_text())
    assert stats == outcome.stats
    assert set(stats["rejects"]) == set(REASONS)
    assert stats["pairs_read"] == 300 == stats["pairs_kept"] + stats["pairs_rejected"]
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert names == sorted([f["path"] for f in doc["files"]] + ["manifest.json"])
    assert "train-00001-of-00002.parquet" in names and "valid-00000-of-00001.parquet" in names
    rows = {split: read_split(str(out), outcome, split) for split in ("train", "valid", "test")}
    assert {s: len(r) for s, r in rows.items()} == stats["splits"]
    assert 0 < stats["splits"]["valid"] < 60 and 0 < stats["splits"]["test"] < 60
    ids = [r["id"] for r in rows["train"]]
    assert len(set(ids)) == len(ids)
    assert all(r["origin"] == f"{small_corpus}.{{en,zh}}" for r in rows["train"])


def test_token_counts_are_t2t_counts_of_the_train_split(small_corpus, tmp_path):
    out = tmp_path / "prepared"
    outcome = prepare(small_corpus, out, num_shards=3, count_buckets=2)
    train = read_split(str(out), outcome, "train")
    for side, column in (("en", "src"), ("zh", "tgt"), ("joined", None)):
        counted: Counter[str] = Counter()
        for path in outcome.manifest["counts"][side]:
            for row in pq.read_table(out / path).to_pylist():
                counted[row["token"]] += row["count"]
        texts = (
            [r[column] for r in train] if column else [r[c] for r in train for c in ("src", "tgt")]
        )
        assert counted == t2t_tokenizer.count_tokens(texts), side
    chars = pq.read_table(out / "counts/chars.parquet").to_pylist()
    assert {r["side"] for r in chars} == {"en", "zh", "joined"}
    tokens = outcome.stats["split_details"]["train"]["src"]["tokens"]
    assert tokens == sum(t2t_tokenizer.count_tokens([r["src"] for r in train]).values())


def test_duplicates_and_bad_lines_are_rejected_counted_and_kept(tmp_path):
    src = ["A cat.", "A cat.", "Same", "", "Dogs.", "bad \udcff", "A cat."]
    tgt = ["一只猫。", "一只猫。", "Same", "空", "狗。", "坏", "一只猫。"]
    raw_src = "\n".join(src).encode("utf-8", "surrogateescape") + b"\n"
    corpus = write_pair(tmp_path / "t", raw_src, ("\n".join(tgt) + "\n").encode())
    out = tmp_path / "out"
    # Named: found by itself, a side whose only non-ASCII line is no UTF-8 is an 8-bit
    # code page (tests/transforms/storage/test_encodings.py), where the line is no reject.
    outcome = prepare(corpus, out, valid_fraction=0, test_fraction=0, src_encoding="utf-8")
    assert outcome.stats["rejects"] == {
        **dict.fromkeys(REASONS, 0),
        "duplicate": 2,
        "copy": 1,
        "empty": 1,
        "invalid-utf8": 1,
    }
    rejects = pq.read_table(out / outcome.manifest["rejects"]["files"][0]).to_pylist()
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (2, "duplicate"),
        (3, "copy"),
        (4, "empty"),
        (6, "invalid-utf8"),
        (7, "duplicate"),
    ]
    assert rejects[0]["detail"] == f"same pair as {corpus}.{{en,zh}}:1"
    assert (
        rejects[3]["src"] == b"bad \xff"
        and rejects[3]["detail"] == "src: invalid start byte at byte 4"
    )
    assert [r["line"] for r in read_split(str(out), outcome, "train")] in ([1, 5], [5, 1])
    counts = {
        r["token"]: r["count"]
        for r in pq.read_table(out / "counts/en-00000-of-00001.parquet").to_pylist()
    }
    assert counts == {"A": 1, "cat": 1, ".": 2, "Dogs": 1}  # duplicates not counted


def test_rerun_is_cached_and_other_options_need_force(small_corpus, tmp_path):
    out = tmp_path / "prepared"
    first = prepare(small_corpus, out)
    again = prepare(small_corpus, out)
    assert again.cached and again.manifest == first.manifest
    refused = r"already holds a nmtpipe.prepare result .* use --replace"
    with pytest.raises(OutputError, match=refused):
        prepare(small_corpus, out, seed=1)
    forced = prepare(small_corpus, out, seed=1, force=True)
    assert not forced.cached and forced.manifest["fingerprint"] != first.manifest["fingerprint"]
    # a damaged committed output is rebuilt rather than trusted
    shard = next(out.glob("train-*.parquet"))
    shard.write_bytes(shard.read_bytes()[:-10])
    rebuilt = prepare(small_corpus, out, seed=1)
    assert not rebuilt.cached and file_hashes(rebuilt) == file_hashes(forced)


def test_explicit_valid_and_test_inputs_and_crlf(tmp_path):
    en, zh = example_lines("ntrex128-enzh", "en", 40), example_lines("ntrex128-enzh", "zh", 40)
    assert en[0].endswith("\r")
    train = write_pair(tmp_path / "train", en[:20], zh[:20])
    test = write_pair(tmp_path / "test", en[20:], zh[20:])
    config = PrepareConfig(
        src_lang="en",
        tgt_lang="zh",
        output=str(tmp_path / "out"),
        trainpref=(str(train),),
        testpref=(str(test),),
        valid_fraction=0.0,
    )
    outcome = run_prepare(config, IN_MEMORY)
    assert outcome.stats["splits"] == {"train": 20, "test": 20}
    rows = read_split(str(tmp_path / "out"), outcome, "test")
    assert not any("\r" in r["src"] or "\r" in r["tgt"] for r in rows)


def test_tsv_input_with_bad_columns(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("Hi.\t嗨。\tCC-BY 2.0\nno tab here\nRun!\t跑！\n", encoding="utf-8")
    config = PrepareConfig(
        src_lang="en",
        tgt_lang="zh",
        output=str(tmp_path / "out"),
        tsv=(str(tsv),),
        valid_fraction=0,
        test_fraction=0,
    )
    outcome = run_prepare(config, IN_MEMORY)
    assert outcome.stats["pairs_kept"] == 2 and outcome.stats["rejects"]["bad-columns"] == 1


def test_runners_and_shuffles_give_identical_bytes(small_corpus, tmp_path, portable_runner):
    reference = prepare(small_corpus, tmp_path / "a", num_shards=2)
    inline = prepare(small_corpus, tmp_path / "b", num_shards=2, spill_dir="none")
    processes = prepare(small_corpus, tmp_path / "c", MULTI_PROCESS, num_shards=2)
    portable = prepare(small_corpus, tmp_path / "d", portable_runner, num_shards=2)
    expected = file_hashes(reference)
    assert file_hashes(inline) == expected
    assert file_hashes(processes) == expected
    assert file_hashes(portable) == expected


def test_s3_input_and_output_match_local_disk(small_corpus, tmp_path, s3):
    import s3fs

    fs = s3fs.S3FileSystem()
    for lang in ("en", "zh"):
        fs.put_file(f"{small_corpus}.{lang}", f"{s3}/raw/train.{lang}")
    local = prepare(small_corpus, tmp_path / "local", num_shards=2)
    remote = prepare(f"{s3}/raw/train", f"{s3}/prepared", num_shards=2)
    # The statistics name the inputs, which differ; the rest is the same.
    assert {k: v for k, v in remote.stats.items() if k != "inputs"} == {
        k: v for k, v in local.stats.items() if k != "inputs"
    }
    assert list(remote.stats["inputs"].values()) == list(local.stats["inputs"].values())
    doc = manifest.read_manifest(f"{s3}/prepared", "nmtpipe.prepare")
    manifest.verify_files(f"{s3}/prepared", doc, checksums=True)
    # Files without origins in them are byte-identical; pair shards differ only there.
    for path, digest in file_hashes(local).items():
        if path.startswith("counts/"):
            assert file_hashes(remote)[path] == digest, path
    for split in ("train", "valid", "test"):
        # origins aside (they name the storage), and NaN (a score without evidence) as a
        # value equal to itself
        def strip(rows: list[dict]) -> list[dict]:
            return [
                {k: "nan" if v != v else v for k, v in r.items() if k != "origin"} for r in rows
            ]

        assert strip(read_split(f"{s3}/prepared", remote, split)) == strip(
            read_split(str(tmp_path / "local"), local, split)
        )
    assert not fs.exists(f"{s3.removeprefix('s3://')}/prepared/.nmtpipe")


def test_origins_are_the_inputs_as_given_so_outputs_are_portable(
    small_corpus, tmp_path, monkeypatch
):
    # The same corpus under two folders, named relatively: the same bytes, no home paths.
    copy = tmp_path / "elsewhere" / "corpus"
    copy.mkdir(parents=True)
    for lang in ("en", "zh"):
        (copy / f"train.{lang}").write_bytes((small_corpus.parent / f"train.{lang}").read_bytes())
    outcomes = []
    for folder in (small_corpus.parent.parent, tmp_path / "elsewhere"):
        monkeypatch.chdir(folder)
        outcomes.append(prepare(Path("corpus/train"), folder / "out"))
        rows = read_split(str(folder / "out"), outcomes[-1], "train")
        assert {r["origin"] for r in rows} == {"corpus/train.{en,zh}"}
    assert file_hashes(outcomes[0]) == file_hashes(outcomes[1])


def test_a_noisy_corpus_loses_its_wrong_languages_and_its_leaked_test_pairs(tmp_path):
    """Tatoeba training data with Japanese and Korean targets, German and French
    sources, NTREX test pairs leaked into it, and one copied whole into valid."""
    langid = Path(__file__).parents[2] / "data" / "langid"

    def sample(name: str) -> list[str]:
        return (langid / f"ntrex128-{name}.txt").read_text(encoding="utf-8").splitlines()[:10]

    en, zh = example_lines("tatoeba-cmn", "en")[::80], example_lines("tatoeba-cmn", "zh")[::80]
    test_en, test_zh = sample("eng"), sample("zho-CN")
    train = write_pair(
        tmp_path / "train",
        en + test_en[:2] + test_en[:5] + sample("deu") + sample("fra") + [test_en[9]],
        zh
        + test_zh[:2]
        + sample("jpn")[:5]
        + sample("zho-CN")
        + sample("zho-CN")
        + [test_zh[9].rstrip("。") + "！"],
    )
    valid = write_pair(tmp_path / "valid", [en[0], test_en[8]], [zh[0], test_zh[8]])
    # A given test set is kept whole, whatever its languages: scores are compared on all of it.
    test = write_pair(tmp_path / "test", [*test_en, test_en[0]], [*test_zh, sample("kor")[0]])
    out = tmp_path / "out"
    outcome = run_prepare(
        PrepareConfig(
            "en",
            "zh",
            str(out),
            trainpref=(str(train),),
            validpref=(str(valid),),
            testpref=(str(test),),
        ),
        IN_MEMORY,
    )
    rows = {s: read_split(str(out), outcome, s) for s in ("train", "valid", "test")}
    # No pair in two splits, no side of a test pair in train or valid, none of valid in train.
    sides = {s: {(r["src"], r["tgt"]) for r in rows[s]} for s in rows}
    assert not (sides["train"] & sides["valid"]) and not (sides["train"] & sides["test"])
    for lower, higher in (("train", "test"), ("valid", "test"), ("train", "valid")):
        for k in ("src", "tgt"):
            assert not {r[k] for r in rows[lower]} & {r[k] for r in rows[higher]}, (lower, k)
    stats = outcome.stats
    assert stats["splits"] == {"train": len(en) - 1, "valid": 1, "test": 11}
    # 5 Japanese targets, 10 German and 10 French sources; as duplicates the two leaked
    # test pairs, valid's first pair in train and valid's copy of a test pair; a test
    # pair with other punctuation as overlap.
    assert stats["rejects"]["wrong-language"] == 25
    assert stats["rejects"]["duplicate"] == 2 + 1 + 1 and stats["rejects"]["overlap"] == 1
    rejects = pq.read_table(out / "rejects").to_pylist()
    wrong = [r["detail"] for r in rejects if r["reason"] == "wrong-language"]
    assert sum(d.startswith("tgt is ja") for d in wrong) == 5
    assert sum(d.startswith("src is de") for d in wrong) == 10
    inputs = stats["inputs"]
    assert inputs[f"{train}.{{en,zh}}"]["read"] == len(en) + 28
    utf8 = {"src": "utf-8", "tgt": "utf-8"}
    assert inputs[f"{valid}.{{en,zh}}"] == {
        "read": 2,
        "kept": 1,
        "rejects": {"duplicate": 1},
        "encoding": utf8,
    }
    assert inputs[f"{test}.{{en,zh}}"] == {
        "read": 11,
        "kept": 11,
        "rejects": {},
        "encoding": utf8,
    }
