"""`nmtpipe refresh`: versions published from what changed, frozen vocabularies, the lock."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from nmtpipe import __version__
from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.workflow.encode import EncodeStep
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.refresh import version_overlap
from nmtpipe.pipelines.workflow.refresh.version_overlap import version_exclusions
from nmtpipe.transforms.formats import overlap_index
from nmtpipe.transforms.formats.encoded_dataset import open_dataset
from nmtpipe.transforms.formats.exclusions import read_exclusions
from nmtpipe.transforms.formats.overlap_index import VersionPart
from nmtpipe.transforms.formats.prepared import read_prepared
from nmtpipe.transforms.storage import fsio, manifest, versions
from nmtpipe.transforms.text.t2t_tokenizer import count_tokens
from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
from tests.helpers import IN_MEMORY, MULTI_PROCESS, command_result, example_lines, write_pair

EN, ZH = example_lines("tatoeba-cmn", "en")[::20], example_lines("tatoeba-cmn", "zh")[::20]
THIRD = len(EN) // 3


def slice_input(raw: Path, k: int) -> Path:
    """The k-th third of 1 in 10 example pairs, as raw/part{k}.{en,zh}."""
    lines = slice(k * THIRD, (k + 1) * THIRD)
    return write_pair(raw / f"part{k}", EN[lines], ZH[lines])


def config(tmp_path: Path, root: str | None = None, prepare=None, **refresh) -> Path:
    doc = {
        "root": root or str(tmp_path / "root"),
        "beam": IN_MEMORY,
        "prepare": {"src_lang": "en", "tgt_lang": "zh", "trainpref": [str(tmp_path / "raw/part*")],
                    "valid_fraction": 0.03, "test_fraction": 0.03, **(prepare or {})},
        "vocab": {"vocab_size": 1000, "joined": True},
        "encode": {"formats": ["arrow", "fairseq"]},
        "train": {"max_tokens": 1024, "max_update": 2, "warmup_updates": 1},
        "decode": {"beam": 2, "max_len_a": 0, "max_len_b": 4},
        "refresh": {"drift_threshold": 1.0, **refresh},
    }  # fmt: skip
    path = tmp_path / "refresh.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def refresh(path: Path, capsys, *args: str) -> str:
    """The report a refresh printed for people (on stderr; stdout is its JSON document)."""
    assert main(["refresh", str(path), *args]) == 0
    out, err = capsys.readouterr()
    assert "status" in command_result(out)
    return err


def texts(url: str) -> dict[str, set[tuple[str, str]]]:
    """The prepared pairs of a dataset or of a version's parts (less what the version
    excludes), per split."""
    if versions.is_version(url):
        root, number = versions.locate(url)
        doc = versions.read_version(root, number)
        dropped = read_exclusions(str(Path(root) / doc["exclusions"]["path"]))
        found = [
            texts_of(str(Path(root) / p["prepared"]), {s: set(r.tolist()) for (k, s), r
                                                     in dropped.items() if k == p["key"]})
            for p in doc["parts"]
        ]  # fmt: skip
        return {
            s: set().union(*(f.get(s, set()) for f in found)) for s in ("train", "valid", "test")
        }
    return texts_of(url, {})


def texts_of(url: str, skip: dict[str, set[int]]) -> dict[str, set[tuple[str, str]]]:
    root, doc = read_prepared(url)
    result = {}
    for split, info in doc["splits"].items():
        rows = []
        for path in info["files"]:
            table = pq.read_table(Path(root) / path, columns=["src", "tgt"])
            rows += zip(table["src"].to_pylist(), table["tgt"].to_pylist(), strict=True)
        result[split] = {pair for i, pair in enumerate(rows) if i not in skip.get(split, ())}
    return result


def test_versions_hold_what_the_inputs_hold_and_only_changes_are_recomputed(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0), slice_input(raw, 1)
    path, root = config(tmp_path), tmp_path / "root"
    out = refresh(path, capsys)
    assert (
        "published" in out and "versions/000001" in out and "prepared 2 part(s), encoded 2" in out
    )
    first = open_dataset(str(root / "versions/LATEST"))
    v1_train = len(first["train"])
    # Nothing changed: nothing is published.
    assert "unchanged: no input changed since version 000001" in refresh(path, capsys)
    assert versions.published(str(root)) == [1]
    # A new input: only it is prepared and encoded, the vocabulary is kept.
    slice_input(raw, 2)
    out = refresh(path, capsys)
    assert (
        "added    1: " in out and "prepared 1 part(s), encoded 1" in out and "vocab    kept" in out
    )
    second = open_dataset(str(root / "versions/000002"))
    assert second.vocab_fingerprint == first.vocab_fingerprint
    assert len(second["train"]) > v1_train
    # Version 1 is unchanged and still readable.
    again = open_dataset(str(root / "versions/000001"))
    assert len(again["train"]) == v1_train
    np.testing.assert_array_equal(again["train"][5][0], first["train"][5][0])
    # The version holds exactly what preparing all inputs at once gives, split by split.
    whole = tmp_path / "whole"
    run_prepare(
        PrepareConfig("en", "zh", str(whole), trainpref=(str(raw / "part*"),),
                      valid_fraction=0.03, test_fraction=0.03),
        IN_MEMORY,
    )  # fmt: skip
    assert texts(str(root / "versions/LATEST")) == texts(str(whole))
    # A changed input and a removed one.
    write_pair(raw / "part0", [*EN[:THIRD], "One more line."], [*ZH[:THIRD], "再多一行。"])
    for lang in ("en", "zh"):
        (raw / f"part1.{lang}").unlink()
    out = refresh(path, capsys)
    assert "changed  1: " in out and "part0" in out and "removed  1: " in out and "part1" in out
    assert "prepared 1 part(s), encoded 1" in out
    doc = versions.read_version(str(root), 3)
    assert [p["origin"].rsplit("/", 1)[-1] for p in doc["parts"]] == [
        "part0.{en,zh}",
        "part2.{en,zh}",
    ]
    assert doc["changes"] | {"drift": None} == {
        "since": 2, "added": [], "changed": [str(raw / "part0.{en,zh}")],
        "removed": [str(raw / "part1.{en,zh}")], "drift": None, "vocab_rebuilt": False,
        "options_changed": False,
    }  # fmt: skip
    third = open_dataset(str(root / "versions/LATEST"))
    assert sum(len(third[s]) for s in third.splits) == sum(doc["splits"].values())


def test_drift_past_the_threshold_builds_a_new_vocabulary(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    # Greek text (kept: language identification would take it for a wrong language):
    # every one of its tokens has letters outside the vocabulary.
    langid = {"langid": False}
    path, root = config(tmp_path, prepare=langid, drift_threshold=0.05), tmp_path / "root"
    refresh(path, capsys)
    v1 = versions.read_version(str(root), 1)
    greek = ["Καλημέρα σας, φίλε μου.", "Το τρένο φεύγει στις δέκα."] * 20
    write_pair(raw / "part_greek", greek, ZH[:40])
    out = refresh(path, capsys)
    v2 = versions.read_version(str(root), 2)
    assert v2["changes"]["vocab_rebuilt"] and v2["vocab"]["path"] != v1["vocab"]["path"]
    assert "vocab    new" in out and "prepared 1 part(s), encoded 2" in out
    # The drift is the share of the new train tokens the old vocabulary cannot spell.
    vocab = SubwordTextEncoder.from_file(str(root / v1["vocab"]["path"] / "vocab.subwords"))
    _, prepared = read_prepared(str(root / v2["parts"][1]["prepared"]))
    train = texts(str(root / v2["parts"][1]["prepared"]))["train"]
    counted = count_tokens([line for pair in sorted(train) for line in pair])
    outside = sum(n for t, n in counted.items() if any(c not in vocab.alphabet for c in t))
    assert prepared["splits"]["train"]["pairs"] == len(train)
    assert v2["changes"]["drift"]["joined"] == pytest.approx(
        outside / sum(counted.values()), abs=1e-6
    )
    # Version 1 still reads with its own vocabulary.
    assert (
        open_dataset(str(root / "versions/000001")).vocab_fingerprint == v1["vocab"]["fingerprint"]
    )


def test_changed_options_make_a_new_version_and_leave_the_old_one_whole(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path, root = config(tmp_path), tmp_path / "root"
    refresh(path, capsys)
    before = open_dataset(str(root / "versions/000001"), fmt="fairseq")
    doc = yaml.safe_load(path.read_text())
    doc["encode"]["formats"] = ["arrow"]
    path.write_text(yaml.safe_dump(doc))
    out = refresh(path, capsys)
    assert "options  the vocab or encode options changed" in out and "encoded 1" in out
    assert open_dataset(str(root / "versions/000002")).manifest["formats"] == ["arrow"]
    again = open_dataset(str(root / "versions/000001"), fmt="fairseq")
    np.testing.assert_array_equal(again["train"][3][1], before["train"][3][1])
    doc["vocab"]["vocab_size"] = 900
    path.write_text(yaml.safe_dump(doc))
    assert "vocab    new" in refresh(path, capsys)


def test_a_corrupted_part_stops_the_refresh_with_the_file_named_and_how_to_rebuild(
    tmp_path, capsys
):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path, root = config(tmp_path), tmp_path / "root"
    refresh(path, capsys)
    part = root / versions.read_version(str(root), 1)["parts"][0]["prepared"]
    shard = sorted(part.glob("train-*.parquet"))[0]
    damaged = bytearray(shard.read_bytes())
    damaged[len(damaged) // 2] ^= 0x10  # same size: only the sha256 (or a page CRC) tells
    shard.write_bytes(bytes(damaged))
    doc = yaml.safe_load(path.read_text())
    doc["encode"]["formats"] = ["arrow"]  # new encode options: the part is encoded again
    path.write_text(yaml.safe_dump(doc))
    assert main(["refresh", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert f"{shard} is corrupted: " in err[-1] and "Traceback" not in "".join(err)
    assert err[-1].endswith(f"delete {part} and run nmtpipe refresh again, which rebuilds it")
    assert versions.published(str(root)) == [1]
    shutil.rmtree(part)  # what the line says to do
    assert "prepared 1 part(s), encoded 1" in refresh(path, capsys)
    assert versions.published(str(root)) == [1, 2]


def test_retention_keeps_the_newest_versions_and_what_they_need(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    path, root = config(tmp_path, keep_versions=2), tmp_path / "root"
    for k in range(3):
        slice_input(raw, k)
        refresh(path, capsys)
    for lang in ("en", "zh"):
        (raw / f"part0.{lang}").unlink()
    out = refresh(path, capsys)
    assert versions.published(str(root)) == [3, 4]
    assert "retired  versions/000002" in out
    needed = versions.referenced(versions.read_version(str(root), 3))
    needed |= versions.referenced(versions.read_version(str(root), 4))
    kept = {f"parts/{p.name}" for p in (root / "parts").iterdir()}
    assert kept == {n.rsplit("/", 1)[0] for n in needed if n.startswith("parts/")}
    for number in (3, 4):
        open_dataset(str(root / f"versions/{number:06d}"))
    with pytest.raises(Exception, match="not a published version"):
        open_dataset(str(root / "versions/000001"))
    # Kept parts lose the encodings no kept version uses (two option changes later).
    doc = yaml.safe_load(path.read_text())
    for formats in (["arrow"], ["fairseq"]):
        doc["encode"]["formats"] = formats
        path.write_text(yaml.safe_dump(doc))
        refresh(path, capsys)
    needed = versions.referenced(versions.read_version(str(root), 5))
    needed |= versions.referenced(versions.read_version(str(root), 6))
    present = {f"parts/{p.parent.name}/{p.name}" for p in (root / "parts").glob("*/*")}
    assert present == {n for n in needed if n.startswith("parts/")}


HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from nmtpipe.transforms.storage import fsio, versions
    with versions.lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
    """
)


def test_a_second_refresh_sees_the_first_ones_lock_and_publishes_nothing(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path, root = config(tmp_path), tmp_path / "root"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(root)], stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).parents[2],
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["refresh", str(path)]) == 1
        err = capsys.readouterr().err
        assert "another refresh holds" in err and f"pid {holder.pid}" in err
        assert versions.latest_number(str(root)) is None and not (root / "parts").exists()
    finally:
        holder.kill()
        holder.wait()
    # The holder was killed: its lock is stale and the next refresh takes it over.
    assert "published" in refresh(path, capsys)
    assert not (root / "versions" / versions.LOCK).exists()


def test_a_lock_from_another_machine_needs_break_lock(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path, root = config(tmp_path), tmp_path / "root"
    (root / "versions").mkdir(parents=True)
    holder = {"host": "not-" + socket.gethostname(), "pid": 1, "since": "2026-11-22T00:00:00Z"}
    (root / "versions" / versions.LOCK).write_text(json.dumps(holder))
    assert main(["refresh", str(path)]) == 1
    assert "re-run with --break-lock" in capsys.readouterr().err
    assert "published" in refresh(path, capsys, "--break-lock")


def test_two_refreshes_at_once_publish_one_whole_version(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0), slice_input(raw, 1)
    path, root = config(tmp_path), tmp_path / "root"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    command = [sys.executable, "-m", "nmtpipe", "refresh", str(path)]
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]  # fmt: skip
    results = [(run.wait(), *run.communicate()) for run in runs]
    published = [r for r in results if r[0] == 0 and "published" in r[1]]
    assert len(published) == 1, results
    other = next(r for r in results if r not in published)
    assert (other[0] == 1 and "another refresh holds" in other[2]) or (
        other[0] == 0 and "unchanged" in other[1]
    ), other
    assert versions.published(str(root)) == [1]
    version = open_dataset(str(root / "versions/LATEST"))
    assert len(version["train"]) == versions.read_version(str(root), 1)["splits"]["train"]


def test_a_refresh_that_fails_publishes_nothing_and_the_rerun_reuses_its_work(
    tmp_path, capsys, monkeypatch
):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path, root = config(tmp_path), tmp_path / "root"

    def broken(*args, **kwargs):
        raise OSError("the encoder's machine went away")

    monkeypatch.setattr(EncodeStep, "graph", broken)
    assert main(["refresh", str(path)]) == 1
    assert versions.latest_number(str(root)) is None
    assert not (root / "versions" / versions.LOCK).exists()
    monkeypatch.undo()
    out = refresh(path, capsys)
    assert "prepared 0 part(s), encoded 1" in out and "versions/000001" in out


def test_until_stops_before_publishing_and_train_continues_on_each_version(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path, root = config(tmp_path, train_updates=2), tmp_path / "root"
    assert "stopped after prepare" in refresh(path, capsys, "--until", "prepare")
    assert versions.latest_number(str(root)) is None
    refresh(path, capsys, "--train")
    (save_dir,) = (root / "models").iterdir()
    assert json.loads((save_dir / "train_summary.json").read_text())["updates"] == 2
    refresh(path, capsys, "--train")  # the same version: no more training
    assert json.loads((save_dir / "train_summary.json").read_text())["updates"] == 2
    slice_input(raw, 1)
    refresh(path, capsys, "--train")
    summary = json.loads((save_dir / "train_summary.json").read_text())
    assert summary["updates"] == 4 and summary["resumed"]
    # --decode translates the version's test split (its texts come from its parts).
    out = refresh(path, capsys, "--decode")
    scores = json.loads((root / "translations" / "000002" / "scores.json").read_text())
    assert scores["sentences"] == versions.read_version(str(root), 2)["splits"]["test"]
    hypotheses = (root / "translations" / "000002" / "hypotheses.txt").read_text().splitlines()
    assert len(hypotheses) == scores["sentences"] and "unchanged" in out
    assert main(["refresh", str(path), "--decode"]) == 0
    assert f"cached: {root}/translations/000002 already holds this translation" in (
        capsys.readouterr().err
    )
    # A model folder with the record of an unreleased nmtpipe (`version.json`) is refused
    # in one line that names it and says what to do; once it is gone, all is as it was.
    (save_dir / "version.json").write_text(json.dumps({"version": 2}))
    for stage in ("--train", "--decode"):
        assert main(["refresh", str(path), stage]) == 1
        assert (
            f"error: {save_dir}/version.json is a record of an unreleased nmtpipe, which this "
            f"one does not read: delete it; the next --train then trains on from the "
            f"checkpoints in {save_dir}"
        ) in capsys.readouterr().err
    (save_dir / "version.json").unlink()
    assert "cached" in refresh(path, capsys, "--train", "--decode")
    assert json.loads((save_dir / "train_summary.json").read_text())["updates"] == 4
    # Raw text against a version: normalised and encoded as the version's parts were.
    (tmp_path / "raw.en").write_text("Good morning.\nWhere is the station?\n", encoding="utf-8")
    assert main(["decode", "--checkpoint", str(save_dir / "checkpoint_last.pt"),
                 "--data", str(root / "versions/LATEST"), "--input", str(tmp_path / "raw.en"),
                 "--output", str(tmp_path / "raw-out"), "--max-len-a", "0",
                 "--max-len-b", "3"]) == 0  # fmt: skip
    assert len((tmp_path / "raw-out" / "hypotheses.txt").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "refresh_section, message",
    [
        ({"keep": 3}, "refresh.keep: not a refresh setting"),
        ({"keep_versions": "all"}, "refresh.keep_versions: wants a int"),
        ({"drift_threshold": -0.1}, "refresh.drift_threshold: must not be negative"),
        ({"checksum": 1}, "refresh.checksum: wants a bool"),
    ],
)
def test_bad_refresh_settings_are_refused(tmp_path, capsys, refresh_section, message):
    path = config(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["refresh"] = refresh_section
    path.write_text(yaml.safe_dump(doc))
    assert main(["refresh", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_refresh_on_s3_with_checksums(tmp_path, capsys, s3, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path = config(tmp_path, root=f"{s3}/refresh", checksum=True)
    assert "versions/000001" in refresh(path, capsys)
    os.utime(raw / "part0.en", (1, 1))  # touched, same bytes: the same input
    assert "unchanged" in refresh(path, capsys)
    version = open_dataset(f"{s3}/refresh/versions/LATEST", cache_dir=str(tmp_path / "cache"))
    assert len(version["train"]) == versions.read_version(f"{s3}/refresh", 1)["splits"]["train"]
    # A second input: the first part's overlap index is read back from the bucket.
    slice_input(raw, 1)
    built = []
    monkeypatch.setattr(overlap_index, "build_index", spy(overlap_index.build_index, built))
    assert "versions/000002" in refresh(path, capsys)
    doc = versions.read_version(f"{s3}/refresh", 2)
    assert all(fsio.exists(f"{s3}/refresh/{p['overlap_index']}") for p in doc["parts"])
    assert len(doc["parts"]) == 2 and len(built) == 1


def test_small_changes_run_in_process_on_local_runners(tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    path = config(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["beam"] = MULTI_PROCESS
    path.write_text(yaml.safe_dump(doc))
    assert main(["refresh", str(path)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"preparing 1 input\(s\) into \S+ \(.*\) on FnApiRunner \(in-process", err)
    assert re.search(r"encoding .* into \S+ \(.*\) on FnApiRunner \(in-process", err)
    doc["refresh"]["in_process_bytes"] = 0  # every input is "large": the configured runner
    path.write_text(yaml.safe_dump(doc))
    slice_input(raw, 1)
    assert main(["refresh", str(path), "--until", "prepare"]) == 0
    assert "on FnApiRunner (2 worker processes" in capsys.readouterr().err


def shouted(k: int) -> tuple[str, str]:
    """Pair k again but for case and punctuation inside: a near-duplicate of it, which
    shares no side with it (`overlap.side_keys`)."""
    return EN[k].upper().replace(" ", " - ", 1), ZH[k][:1] + "，" + ZH[k][1:]


def leaky_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """Two train inputs sharing ten pairs, five more of the first in the second but for
    case and punctuation, and a test input whose second source is a training sentence of
    the first, translated anew, and whose third pair is one of the first's, shouted;
    their config and test input."""
    raw = tmp_path / "raw"
    raw.mkdir()
    write_pair(raw / "part0", EN[:300], ZH[:300])
    near = [shouted(k) for k in range(100, 105)]
    write_pair(
        raw / "part1", EN[290:600] + [s for s, _ in near], ZH[290:600] + [t for _, t in near]
    )
    test = write_pair(
        tmp_path / "test",
        [EN[700], EN[5], shouted(20)[0]],
        [ZH[700], "另一个全新的翻译。", shouted(20)[1]],
    )
    prepare = {"testpref": [str(test)], "valid_fraction": 0.05}
    return config(tmp_path, prepare=prepare), test


def test_a_version_leaves_out_pairs_repeated_or_leaked_across_its_inputs(tmp_path, capsys):
    path, test = leaky_inputs(tmp_path)
    raw, root = tmp_path / "raw", tmp_path / "root"
    refresh(path, capsys)
    doc = versions.read_version(str(root), 1)
    assert doc["exclusions"]["rejects"].get("duplicate", 0) >= 10
    assert doc["exclusions"]["rejects"]["overlap"] >= 1
    assert doc["exclusions"]["rejects"]["near-duplicate"] == 6  # 5 across inputs, 1 of test
    # What one prepare of all inputs gives, split by split.
    whole = tmp_path / "whole"
    run_prepare(
        PrepareConfig("en", "zh", str(whole), trainpref=(str(raw / "part*"),),
                      testpref=(str(test),), valid_fraction=0.05, test_fraction=0.03),
        IN_MEMORY,
    )  # fmt: skip
    version = texts(str(root / "versions/LATEST"))
    assert version == texts(str(whole))
    assert not version["train"] & version["test"] and EN[5] not in {s for s, _ in version["train"]}
    # Readers see the version without them, ids and sizes alike.
    data = open_dataset(str(root / "versions/LATEST"), "fairseq")
    assert {s: len(data[s]) for s in data.splits} == doc["splits"]
    assert len(data["train"].src_sizes) == doc["splits"]["train"]
    arrow = open_dataset(str(root / "versions/LATEST"), "arrow")
    for i in (0, 100, -1):  # fairseq's ids of T2T pieces are theirs + 2 (EOS aside)
        np.testing.assert_array_equal(arrow["train"][i][1][:-1] + 2, data["train"][i][1][:-1])


def test_the_checks_across_inputs_read_each_part_once_and_trust_text_not_hashes(
    tmp_path, capsys, monkeypatch
):
    """Each part's train index (ids and side-key hashes) is built once and kept with the
    version; what it finds is what reading every pair finds, a damaged index is built
    again, and a hash shared by chance excludes nothing (the text decides)."""
    path, _ = leaky_inputs(tmp_path)
    raw, root = tmp_path / "raw", tmp_path / "root"
    built = []
    monkeypatch.setattr(overlap_index, "build_index", spy(overlap_index.build_index, built))
    refresh(path, capsys)
    assert len(built) == 3  # one per part, the test input's too
    doc = versions.read_version(str(root), 1)
    parts = [
        VersionPart(p["key"], str(root / p["prepared"]), str(root / f"parts/{p['key']}"))
        for p in doc["parts"]
    ]
    assert [p["overlap_index"] for p in doc["parts"]] == [
        os.path.relpath(overlap_index.index_url(part), root) for part in parts
    ]
    expected = version_exclusions(parts, keep_overlap=False)
    assert len(expected) == sum(doc["exclusions"]["pairs"].values()) and len(built) == 3
    # A new input: only its index is built.
    write_pair(raw / "part2", EN[600:700] + EN[:5], ZH[600:700] + ZH[:5])
    refresh(path, capsys)
    assert len(built) == 4
    # Damaged: cut short, it is built again and finds the same.
    index = Path(overlap_index.index_url(parts[0]))
    index.write_bytes(index.read_bytes()[:100])
    assert version_exclusions(parts, keep_overlap=False) == expected and len(built) == 5
    assert np.load(index).shape[0] == len(overlap_index.COLUMNS)
    # Every side hashed alike: every train row is a candidate, and only the text excludes.
    monkeypatch.setattr(overlap_index, "hash64", lambda keys: np.zeros(len(keys), np.uint64))
    for part in parts:
        Path(overlap_index.index_url(part)).unlink()
    assert version_exclusions(parts, keep_overlap=False) == expected
    # In ranges of 64 ids and keys, the same, in another order.
    monkeypatch.setattr(version_overlap, "RANGE_ROWS", 64)
    where = lambda row: (row["part"], row["split"], row["row"])  # noqa: E731
    assert sorted(version_exclusions(parts, False), key=where) == sorted(expected, key=where)


def spy(function, calls: list):
    def wrapper(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    return wrapper


def old_layout(root: Path, path: Path) -> dict[str, str]:
    """Move a published root into the layout the refreshes before typed fingerprints
    wrote (a part keyed by the YAML of its prepare section as written, the encode
    options the same way, the version recording those keys): folders renamed, the
    version rewritten. The old keys, by new key."""
    written = yaml.safe_load(path.read_text())
    doc = versions.read_version(str(root), 1)
    roles = sorted({p["role"] for p in doc["parts"]})
    encode_key = manifest.fingerprint({"code_version": __version__, "encode": written["encode"]})
    renamed = {}
    for part in doc["parts"]:
        keyed = {"input": part["input"], "roles": roles, "prepare": written["prepare"]}
        old = manifest.fingerprint({"code_version": __version__, **keyed})[:16]
        (root / "parts" / part["key"]).rename(root / "parts" / old)
        vocab = doc["vocab"]["path"].rsplit("/", 1)[-1]
        encoded = f"parts/{old}/encoded-{vocab}-{encode_key[:8]}"
        (root / part["encoded"].replace(part["key"], old)).rename(root / encoded)
        encoded_doc = json.loads((root / encoded / "manifest.json").read_text())
        encoded_doc["prepared"]["url"] = str(root / "parts" / old / "prepared")
        (root / encoded / "manifest.json").write_text(json.dumps(encoded_doc))
        renamed[part["key"]] = old
        part["overlap_index"] = part["overlap_index"].replace(part["key"], old)
        part |= {"key": old, "prepared": f"parts/{old}/prepared", "encoded": encoded}
    vocab_options = manifest.read_manifest(str(root / doc["vocab"]["path"]), "nmtpipe.vocab")
    doc["options"] = {"vocab": manifest.fingerprint(vocab_options["options"]),
                      "encode": encode_key[:8]}  # fmt: skip
    (root / "versions/000001/manifest.json").write_text(json.dumps(doc))
    return renamed


def test_a_root_in_the_old_layout_is_read_and_refreshed_into_the_new_one(tmp_path, capsys):
    """Its parts, keyed otherwise, count as changed: prepared again under their
    fingerprints, the new version holds the same pairs, the old one still reads."""
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0), slice_input(raw, 1)
    path, root = config(tmp_path), tmp_path / "root"
    refresh(path, capsys)
    first = open_dataset(str(root / "versions/000001"))
    renamed = old_layout(root, path)
    out = refresh(path, capsys)
    assert "changed  2: " in out and "prepared 2 part(s), encoded 2" in out
    doc = versions.read_version(str(root), 2)
    assert {p["key"] for p in doc["parts"]} == set(renamed)
    assert texts(str(root / "versions/000002")) == texts(str(root / "versions/000001"))
    again = open_dataset(str(root / "versions/000001"))
    np.testing.assert_array_equal(again["train"][3][0], first["train"][3][0])


def test_trusted_pairs_teach_every_part_and_a_new_trusted_corpus_prepares_them_again(
    tmp_path, capsys
):
    raw = tmp_path / "raw"
    raw.mkdir()
    slice_input(raw, 0)
    lines = slice(10, 30000, 20)  # Tatoeba's pairs between the parts' (theirs: every 20th)
    en, zh = example_lines("tatoeba-cmn", "en")[lines], example_lines("tatoeba-cmn", "zh")[lines]
    trusted = write_pair(tmp_path / "trusted", en[:1200], zh[:1200])
    path = config(tmp_path, prepare={"trustedpref": [str(trusted)]})
    out = refresh(path, capsys)
    assert "learned from each new part's own pairs and the trusted pairs" in out

    def parts_learned() -> dict[str, int]:
        doc = versions.read_version(
            str(tmp_path / "root"), versions.published(str(tmp_path / "root"))[-1]
        )
        found = {}
        for part in doc["parts"]:
            stats = json.loads((tmp_path / "root" / part["prepared"] / "stats.json").read_text())
            assert set(stats["calibrated"]) == {"lexical", "length"}
            found[part["origin"]] = stats["learned"]["lexical"]
        return found

    first = parts_learned()
    assert all(n > 1190 for n in first.values())  # the part's pairs and the trusted ones
    slice_input(raw, 1)
    out = refresh(path, capsys)
    assert "prepared 1 part(s)" in out and "trusted pairs or" not in out
    write_pair(trusted, en[:1500], zh[:1500])
    out = refresh(path, capsys)
    assert "the trusted pairs or --trusted-keep differ from version 2's" in out
    assert "prepared 2 part(s)" in out  # what both learned from changed
    learned = parts_learned()
    assert learned[str(raw / "part0.{en,zh}")] == first[str(raw / "part0.{en,zh}")] + 300
    # A part's own file as the trusted pairs is refused.
    path = config(tmp_path, prepare={"trustedpref": [str(raw / "part1")]})
    assert main(["refresh", str(path)]) == 2
    assert "part1.en is given both as trusted pairs and as an input" in capsys.readouterr().err
