"""`nmtpipe encode` end to end: formats, ids, runners, caching, S3, faults, damaged shards."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.workflow.encode import EncodeConfig, _runs, run_encode
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from nmtpipe.transforms.errors import (
    ConfigError,
    InputError,
    IntegrityError,
    ManifestError,
    StorageError,
    find_user_error,
)
from nmtpipe.transforms.formats.encoded_dataset import open_dataset
from nmtpipe.transforms.storage import fsio, manifest, retry
from nmtpipe.transforms.storage.retry import RetryPolicy
from nmtpipe.transforms.vocab import id_layout
from nmtpipe.transforms.vocab.fairseq_dict import read_dict
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig
from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
from tests.flaky_fs import FlakyMemoryFileSystem
from tests.helpers import IN_MEMORY, MULTI_PROCESS, prepare_example


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A prepared corpus (3 train shards; 16 test shards, 5 of them empty) and two
    vocabularies of it: joined T2T subwords and per-language SentencePiece BPE."""
    folder = tmp_path_factory.mktemp("encode")
    prepared = prepare_example(folder, 16, num_shards=3, test_shards=16, test_fraction=0.01)
    t2t, bpe = str(folder / "t2t"), str(folder / "bpe")
    run_vocab(VocabConfig(prepared, t2t, vocab_size=1500, joined=True), IN_MEMORY)
    run_vocab(
        VocabConfig(
            prepared, bpe, model="bpe", vocab_size=1500, spm=SpmConfig(character_coverage=0.98)
        ),
        IN_MEMORY,
    )
    return {"prepared": prepared, "t2t": t2t, "bpe": bpe}


def encode(inputs, output, vocab="t2t", beam_args=IN_MEMORY, force=False, **options):
    config = EncodeConfig(inputs["prepared"], inputs[vocab], str(output), **options)
    return run_encode(config, list(beam_args), force=force)


def prepared_texts(inputs, split):
    doc = manifest.read_manifest(inputs["prepared"], "nmtpipe.prepare")
    tables = [pq.read_table(f"{inputs['prepared']}/{p}") for p in doc["splits"][split]["files"]]
    return [(row["src"], row["tgt"], row["id"]) for t in tables for row in t.to_pylist()]


def file_digests(doc):
    """path → sha256 of every data file (the manifest itself records a timestamp)."""
    return {f["path"]: f["sha256"] for f in doc["files"]}


@pytest.fixture(scope="module")
def t2t_output(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("t2t-encoded") / "out"
    return encode(inputs, out), out


def test_t2t_encoding_in_both_formats(inputs, t2t_output):
    outcome, out = t2t_output
    doc = outcome.manifest
    prep = manifest.read_manifest(inputs["prepared"], "nmtpipe.prepare")
    test_rows = [f["rows"] for f in prep["files"] if f.get("split") == "test"]
    assert len(test_rows) == 16 and test_rows.count(0) >= 1  # empty shards exist
    # One part per non-empty prepared shard (they are small); fairseq files named as
    # fairseq-preprocess names them, next to the dictionaries.
    assert doc["splits"]["train"]["arrow"] == [
        f"arrow/train-{k:05d}-of-00003.arrow" for k in range(3)
    ]
    nonempty = 16 - test_rows.count(0)  # test10, where there is one, after test9
    assert doc["splits"]["test"]["arrow"] == [
        f"arrow/test-{k:05d}-of-{nonempty:05d}.arrow" for k in range(nonempty)
    ]
    assert doc["splits"]["test"]["fairseq"] == [
        f"fairseq/test{k or ''}.en-zh" for k in range(nonempty)
    ]
    assert doc["splits"]["train"]["fairseq"] == [
        "fairseq/train.en-zh", "fairseq/train1.en-zh", "fairseq/train2.en-zh"
    ]  # fmt: skip
    for lang in ("en", "zh"):
        vocab_dict = Path(inputs["t2t"], f"dict.{lang}.txt").read_bytes()
        assert (out / "fairseq" / f"dict.{lang}.txt").read_bytes() == vocab_dict
    assert doc["dtypes"] == {"arrow": "uint16", "fairseq": "uint16"} and doc["joined"]
    t2t_size = SubwordTextEncoder.from_file(f"{inputs['t2t']}/vocab.subwords").vocab_size
    assert doc["vocab_sizes"]["arrow"] == {"en": t2t_size, "zh": t2t_size}
    assert doc["vocab_sizes"]["fairseq"]["en"] == 4 + len(
        read_dict((out / "fairseq" / "dict.en.txt").read_text(encoding="utf-8"))
    )
    assert doc["id_layouts"]["arrow"] == id_layout.T2T.as_dict()
    assert doc["id_layouts"]["fairseq"] == id_layout.FAIRSEQ.as_dict()
    assert (
        doc["vocab"]["fingerprint"]
        == manifest.read_manifest(inputs["t2t"], "nmtpipe.vocab")["fingerprint"]
    )
    manifest.verify_files(str(out), doc, checksums=True)

    encoder = SubwordTextEncoder.from_file(f"{inputs['t2t']}/vocab.subwords")
    arrow, fairseq = (
        open_dataset(str(out), "arrow"),
        open_dataset(str(out / "manifest.json"), "fairseq"),
    )
    for split in ("train", "valid", "test"):
        texts = prepared_texts(inputs, split)
        a, f = arrow[split], fairseq[split]
        assert len(a) == len(f) == len(texts) == doc["splits"][split]["pairs"] > 0
        assert a.ids.tolist() == [i for _, _, i in texts]
        assert np.array_equal(a.src_sizes, f.src_sizes) and np.array_equal(a.tgt_sizes, f.tgt_sizes)
        for i, (src, tgt, _) in enumerate(texts):
            a_src, a_tgt = a[i]
            assert a_src[-1] == a_tgt[-1] == id_layout.T2T.eos
            assert encoder.decode(a_src[:-1].tolist()) == src
            assert encoder.decode(a_tgt[:-1].tolist()) == tgt
            f_src, f_tgt = f[i]
            assert (
                f_src.tolist()
                == id_layout.to_fairseq(id_layout.T2T, a_src.astype(np.int64)).tolist()
            )
            assert (
                f_tgt.tolist()
                == id_layout.to_fairseq(id_layout.T2T, a_tgt.astype(np.int64)).tolist()
            )
        assert a[-1][0].tolist() == a[len(a) - 1][0].tolist()
    stats = outcome.stats["splits"]["train"]
    assert stats["en"]["tokens"] == int(arrow["train"].src_sizes.sum())
    assert stats["zh"]["length_tokens"]["max"] == int(arrow["train"].tgt_sizes.max())
    assert stats["en"]["unk"] == 0  # T2T escapes what it does not know


def test_parts_are_runs_of_whole_row_groups():
    assert _runs([10, 10, 0, 10, 10, 10], 20) == [(0, 1), (3, 4), (5,)]
    assert _runs([50, 0, 5], 20) == [(0,), (2,)]
    assert _runs([0, 0], 20) == [] and _runs([3, 4], 100) == [(0, 1)]


def test_fairseq_ids_are_the_dictionarys_ids(inputs, t2t_output):
    _, out = t2t_output
    symbols = ["<s>", "<pad>", "</s>", "<unk>"] + [
        s for s, _ in read_dict((out / "fairseq" / "dict.en.txt").read_text(encoding="utf-8"))
    ]
    encoder = SubwordTextEncoder.from_file(f"{inputs['t2t']}/vocab.subwords")
    src, _ = open_dataset(str(out), "fairseq")["train"][0]
    assert "".join(symbols[i] for i in src[:-1]) == "".join(
        encoder.subtokens[i] for i in encoder.encode(prepared_texts(inputs, "train")[0][0])
    )
    assert symbols[src[-1]] == "</s>"


def test_runners_give_the_same_bytes_and_reruns_are_cached(
    inputs, t2t_output, tmp_path, portable_runner
):
    first, _ = t2t_output
    portable = encode(inputs, tmp_path / "portable", beam_args=portable_runner)
    assert file_digests(portable.manifest) == file_digests(first.manifest)
    other = encode(inputs, tmp_path / "mp", beam_args=MULTI_PROCESS)
    assert file_digests(other.manifest) == file_digests(first.manifest)
    assert other.stats == first.stats
    again = encode(inputs, tmp_path / "mp")
    assert again.cached and file_digests(again.manifest) == file_digests(first.manifest)
    forced = encode(inputs, tmp_path / "mp", force=True)
    assert not forced.cached and file_digests(forced.manifest) == file_digests(first.manifest)
    with pytest.raises(Exception, match=r"already holds a nmtpipe\.encode result"):
        encode(inputs, tmp_path / "mp", formats=("fairseq",))


def test_sentencepiece_vocabularies_count_unknowns(inputs, tmp_path):
    outcome = encode(inputs, tmp_path / "bpe", vocab="bpe", formats=("fairseq",))
    doc = outcome.manifest
    assert doc["formats"] == ["fairseq"] and not (tmp_path / "bpe" / "arrow").exists()
    ds = open_dataset(str(tmp_path / "bpe"))
    assert ds.format == "fairseq" and ds.layout == id_layout.FAIRSEQ
    for split in ("train", "test"):
        data = ds[split]
        unk = sum(int(np.count_nonzero(data[i][0] == 3)) for i in range(len(data)))
        assert outcome.stats["splits"][split]["en"]["unk"] == unk
    # Characters outside the model's 98% coverage are <unk>.
    assert sum(outcome.stats["splits"][s]["zh"]["unk"] for s in ("train", "valid", "test")) > 0
    with pytest.raises(ManifestError, match="has no arrow shards; it has fairseq"):
        open_dataset(str(tmp_path / "bpe"), "arrow")


def test_sentencepiece_encodes_in_threads_to_the_same_bytes(inputs, tmp_path, monkeypatch):
    """Threads of one worker encode batches ahead of the writer (SentencePiece releases
    the GIL); the files are those of one thread."""
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    said: list[str] = []
    config = EncodeConfig(inputs["prepared"], inputs["bpe"], str(tmp_path / "t"), batch_size=16)
    threaded = run_encode(config, IN_MEMORY, log=said.append)
    assert "FnApiRunner (in-process, " in said[-1] and said[-1].endswith("2 thread(s) per worker")
    one = ["--direct_running_mode=multi_threading", "--direct_num_workers=4"]
    config = dataclasses.replace(config, output=str(tmp_path / "one"))
    single = run_encode(config, one, log=said.append)
    assert said[-1].endswith("1 thread(s) per worker")
    assert file_digests(threaded.manifest) == file_digests(single.manifest)
    assert threaded.stats == single.stats
    # T2T's encoder is Python: one thread, and on a local runner of its own default a
    # worker process per core.
    config = EncodeConfig(inputs["prepared"], inputs["t2t"], str(tmp_path / "t2t"))
    run_encode(config, ["--direct_running_mode=in_memory"], log=said.append)
    assert said[-1].endswith("1 thread(s) per worker")


def test_bad_inputs(inputs, tmp_path):
    with pytest.raises(InputError, match="holds no committed vocab output"):
        run_encode(EncodeConfig(inputs["prepared"], str(tmp_path), str(tmp_path / "o")), IN_MEMORY)
    with pytest.raises(InputError, match="holds no committed prepare output"):
        run_encode(EncodeConfig(str(tmp_path), inputs["t2t"], str(tmp_path / "o")), IN_MEMORY)
    with pytest.raises(ConfigError, match="--formats takes one or more of arrow,fairseq"):
        EncodeConfig("p", "v", "o", formats=("arrow", "tfrecord"))
    other = tmp_path / "vocab-de"
    shutil.copytree(inputs["t2t"], other)
    doc = json.loads((other / "manifest.json").read_text())
    doc["languages"] = {"src": "de", "tgt": "zh"}
    (other / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"vocabulary at .* is for .*'de'"):
        run_encode(EncodeConfig(inputs["prepared"], str(other), str(tmp_path / "o")), IN_MEMORY)


def copy_output(t2t_output, tmp_path):
    _, out = t2t_output
    shutil.copytree(out, tmp_path / "copy")
    return tmp_path / "copy"


def test_damaged_shards_are_named(t2t_output, tmp_path):
    out = copy_output(t2t_output, tmp_path)
    shard = out / "fairseq" / "train1.en-zh.zh.bin"
    data = shard.read_bytes()
    shard.write_bytes(data[:-2])
    with pytest.raises(ManifestError, match=r"train1\.en-zh\.zh\.bin has \d+ bytes, the manifest"):
        open_dataset(str(out), "fairseq")
    shard.write_bytes(data[:-2] + b"\xff\xff")  # same size, other bytes
    digests = r"its sha256 is [0-9a-f]{64}, its manifest says [0-9a-f]{64}"
    rebuild = rf"rebuild it: nmtpipe encode \.\.\. --output {out} --force$"
    with pytest.raises(IntegrityError, match=rf"zh\.bin is corrupted: {digests}; {rebuild}"):
        open_dataset(str(out), "fairseq")
    open_dataset(str(out), "arrow")  # the other format is intact
    index = out / "fairseq" / "valid.en-zh.en.idx"
    raw = bytearray(index.read_bytes())
    raw[:4] = b"JUNK"
    index.write_bytes(bytes(raw))
    shard.write_bytes(data)
    with pytest.raises(ManifestError, match=r"valid\.en-zh\.en\.idx is not a fairseq MMIDIDX"):
        open_dataset(str(out), "fairseq", verify="size")  # structure is checked too


def test_manifest_paths_outside_the_dataset_are_refused(t2t_output, tmp_path):
    out = copy_output(t2t_output, tmp_path)
    doc = json.loads((out / "manifest.json").read_text())
    doc["files"][0]["path"] = "../../etc/passwd"
    (out / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(
        ManifestError, match=r"'\.\./\.\./etc/passwd', which is outside the dataset"
    ):
        open_dataset(str(out))


def test_s3_output_and_the_readers_file_cache(inputs, t2t_output, tmp_path, s3):
    import s3fs

    first, _ = t2t_output
    remote = encode(inputs, f"{s3}/encoded")
    assert file_digests(remote.manifest) == file_digests(first.manifest)
    cache = tmp_path / "cache"
    ds = open_dataset(f"{s3}/encoded", "fairseq", cache_dir=str(cache))
    local = open_dataset(str(t2t_output[1]), "fairseq")
    assert all(
        np.array_equal(ds["train"][i][1], local["train"][i][1]) for i in range(len(local["train"]))
    )
    cached = sorted(p.name for p in cache.iterdir())
    assert len(cached) > 10
    fs = s3fs.S3FileSystem()
    key = f"{s3.removeprefix('s3://')}/encoded/fairseq/train.en-zh.en.bin"
    good = fs.cat_file(key)
    fs.pipe_file(key, bytes(len(good)))  # replaced remotely, same size
    open_dataset(f"{s3}/encoded", "fairseq", cache_dir=str(cache))  # the cached copy is intact
    with pytest.raises(ManifestError, match=r"s3://nmtpipe-test/encoded/fairseq/train\.en-zh"):
        open_dataset(f"{s3}/encoded", "fairseq", cache_dir=str(tmp_path / "fresh"))


@pytest.fixture
def no_wait(monkeypatch):
    """Retries without the back-off delays (the same number of attempts)."""
    monkeypatch.setattr(retry, "DEFAULT_POLICY", RetryPolicy(first_delay=0.0))


def test_transient_storage_errors_are_retried(inputs, t2t_output, no_wait):
    FlakyMemoryFileSystem.faults.reset(fail_every=4)
    try:
        flaky = encode(inputs, "flaky://encoded")
        assert FlakyMemoryFileSystem.faults.failed > 10
    finally:
        FlakyMemoryFileSystem.faults.reset()
    assert file_digests(flaky.manifest) == file_digests(t2t_output[0].manifest)
    manifest.verify_files("flaky://encoded", flaky.manifest, checksums=True)
    fsio.remove_tree("flaky://encoded")


def test_persistent_storage_errors_commit_nothing(inputs, no_wait):
    FlakyMemoryFileSystem.faults.reset(always_fail=r"train1\.en-zh\.zh\.bin")
    try:
        with pytest.raises(Exception) as info:
            encode(inputs, "flaky://broken")
    finally:
        FlakyMemoryFileSystem.faults.reset()
    error = find_user_error(info.value)
    assert isinstance(error, StorageError)
    assert "could not write flaky://broken/fairseq/train1.en-zh.zh.bin" in str(error)
    assert "gave up after 6 attempts" in str(error)
    assert not fsio.exists("flaky://broken/manifest.json")
    fsio.remove_tree("flaky://broken")


def test_transient_s3_errors_are_retried(inputs, t2t_output, s3, no_wait):
    from tests.flaky_fs import FlakyS3FileSystem

    FlakyS3FileSystem.clear_instance_cache()
    FlakyS3FileSystem.faults.reset(fail_every=3)
    try:
        flaky = encode(inputs, f"flaky{s3}/encoded")
        assert FlakyS3FileSystem.faults.failed >= 5
    finally:
        FlakyS3FileSystem.faults.reset()
    assert file_digests(flaky.manifest) == file_digests(t2t_output[0].manifest)
    assert open_dataset(f"{s3}/encoded", verify="sha256").splits == ["test", "train", "valid"]
