"""nmtpipe's Beam steps on real Flink and Spark clusters (`scripts/local-cluster`): the
same bytes and counts as the FnApiRunner, every job run by the engine itself, and a
worker lost in the middle of a step.

The clusters are found, never started (conftest.py): without one these tests skip.
Each Beam job costs ~9-11 s on Flink and ~13 s on Spark whatever its size (a small
prepare, command to commit: docs/guides/scale.md), so the corpus is small and the steps
are few.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from nmtpipe.transforms.options import duration_text
from nmtpipe.transforms.storage import versions
from nmtpipe.transforms.vocab.kinds.t2t import T2tConfig
from tests.clusters.conftest import Cluster, find_cluster, local_cluster
from tests.helpers import IN_MEMORY, command_result, example_lines

pytestmark = [
    pytest.mark.slow,
    # Beam's LOOPBACK workers close their data channel after the job and a reader thread
    # raises CANCELLED ("Multiplexer hanging up"): Beam's own shutdown, after the result.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning"),
]

EN, ZH = example_lines("tatoeba-cmn", "en")[::16], example_lines("tatoeba-cmn", "zh")[::16]
# Lines for every reason prepare rejects a pair, so that the counts compared mean something.
BAD = [
    (EN[0], ZH[0]),  # duplicate
    ("", "空的。"),  # empty
    ("Hello there, my friend.", "Hello there, my friend."),  # copy
    ("Hi.", "这是一个非常非常非常长的句子，它的长度远远超过了英文那一边的长度，所以应该被拒绝。"),
    ("This is a sentence about cats.", "Ceci est une phrase sur les chats et les chiens."),
    (" ".join(["word"] * 600), "很长。"),  # too long
]
# The learned scorers learn from a sample of about half the corpus's 2,000 pairs, chosen
# on the cluster as on the FnApiRunner.
LEARN_PAIRS = 1000
# a sampled (Beam) t2t
T2T = {"vocab_size": 1000, "joined": True, "t2t": T2tConfig(file_byte_budget=20000)}


def write_corpus(prefix: Path) -> Path:
    src = [*EN, *(s for s, _ in BAD)]
    tgt = [*ZH, *(t for _, t in BAD)]
    for lang, side in (("en", src), ("zh", tgt)):
        data = ("\n".join(side) + "\n").encode() + (
            b"bad \xff bytes\n" if lang == "en" else "坏。\n".encode()
        )
        Path(f"{prefix}.{lang}").write_bytes(data)
    return prefix


def chain_config(folder: Path, root: Path, beam: list[str]) -> Path:
    """The workflow on the corpus: a joined unigram vocabulary, both encode formats, a
    tiny train and decode."""
    doc = {
        "root": str(root),
        "beam": beam,
        "prepare": {"src_lang": "en", "tgt_lang": "zh", "trainpref": [str(folder / "train")],
                    "valid_fraction": 0.03, "test_fraction": 0.03, "learn_pairs": LEARN_PAIRS},
        "vocab": {"model": "unigram", "vocab_size": 2000, "joined": True,
                  "character_coverage": 0.98, "sample_sentences": 1500},
        "encode": {"formats": ["arrow", "fairseq"]},
        "train": {"max_tokens": 1024, "max_update": 2, "warmup_updates": 1},
        "decode": {"beam": 1, "max_len_a": 0, "max_len_b": 3},
    }  # fmt: skip
    path = root.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def digests(url: Path) -> dict[str, str]:
    """path → sha256 of every file a step committed, as its manifest lists them."""
    doc = json.loads((url / "manifest.json").read_text())
    return {f["path"]: f["sha256"] for f in doc["files"]}


def statuses(stdout: str) -> dict[str, str]:
    return {s["step"]: s["status"] for s in command_result(stdout)["steps"]}


def counts(stats: dict) -> dict:
    """What prepare counted: pairs read, kept, rejected (by reason), per split."""
    keys = ("pairs_read", "pairs_kept", "pairs_rejected", "rejects", "splits")
    return {k: stats[k] for k in keys}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The chain to encode and the sampled t2t vocabulary on the FnApiRunner, in process."""
    folder = tmp_path_factory.mktemp("engines")
    write_corpus(folder / "train")
    assert (
        main(["run", str(chain_config(folder, folder / "fnapi", IN_MEMORY)), "--until", "encode"])
        == 0
    )
    run_vocab(
        VocabConfig(str(folder / "fnapi/prepared"), str(folder / "fnapi/t2t"), **T2T), IN_MEMORY
    )
    return folder


def test_each_step_and_the_chain_give_the_fnapi_bytes(cluster: Cluster, reference, capsys):
    """`nmtpipe run` one step at a time, each a job the engine ran; then train and
    decode; then a sampled t2t vocabulary: every committed file as the FnApiRunner's."""
    capsys.readouterr()
    ref = reference / "fnapi"
    root = reference / cluster.name
    path = chain_config(reference, root, cluster.options)
    for step, folder in (("prepare", "prepared"), ("vocab", "vocab"), ("encode", "encoded")):
        before = cluster.finished()
        assert main(["run", str(path), "--until", step]) == 0
        out = capsys.readouterr().out
        assert statuses(out)[step] == "ran"
        assert cluster.new_jobs(before, 1) == 1, f"{step} ran no job on {cluster.name}"
        assert digests(root / folder) == digests(ref / folder), step
        if step == "prepare":
            stats = json.loads((root / "prepared/stats.json").read_text())
            expected = json.loads((ref / "prepared/stats.json").read_text())
            assert counts(stats) == counts(expected)
            assert all(stats["rejects"][r] > 0 for r in ("duplicate", "empty", "copy", "overlap"))
    if cluster.name == "flink":  # the whole chain once: train and decode (torch, here)
        before = cluster.finished()
        assert main(["run", str(path)]) == 0
        ran = statuses(capsys.readouterr().out)
        assert ran == {"prepare": "cached", "vocab": "cached", "encode": "cached",
                       "train": "ran", "decode": "ran"}  # fmt: skip
        assert json.loads((root / "decoded/scores.json").read_text())["sentences"] > 0
        assert cluster.new_jobs(before, 0, timeout=0) == 0
    # T2T from a byte-budget sample (from prepare's counts it runs no Beam job).
    before = cluster.finished()
    run_vocab(VocabConfig(str(root / "prepared"), str(root / "t2t"), **T2T), cluster.options)
    assert cluster.new_jobs(before, 1) == 1
    assert digests(root / "t2t") == digests(ref / "t2t")


# -- refresh ------------------------------------------------------------------------------


def refresh_config(raw: Path, root: Path, beam: list[str]) -> Path:
    doc = {
        "root": str(root),
        "beam": beam,
        "prepare": {"src_lang": "en", "tgt_lang": "zh", "trainpref": [str(raw / "part*")],
                    "valid_fraction": 0.03, "test_fraction": 0.03},
        "vocab": {"vocab_size": 1000, "joined": True},
        "encode": {"formats": ["arrow", "fairseq"]},
        "train": {"max_tokens": 1024, "max_update": 2, "warmup_updates": 1},
        "decode": {"beam": 1},
        "refresh": {"drift_threshold": 1.0},
    }  # fmt: skip
    path = root.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def tree_digests(root: Path) -> dict[str, str]:
    """Every file under a refresh root (versions, parts, vocabularies) by content; the
    manifests and reports with their root and time of writing left out (they differ by
    design between two roots)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or rel.endswith(".lock") or "/.nmtpipe/" in f"/{rel}":
            continue
        data = path.read_text(encoding="utf-8") if path.suffix in (".json", ".html") else None
        if path.name == "manifest.json":
            doc = json.loads(data.replace(str(root), "<root>"))
            doc.pop("created", None)
            data = json.dumps(doc, sort_keys=True)
        elif path.name == "report.html":
            data = re.sub(r"Written [0-9T:+-]+\.", "", data.replace(str(root), "<root>"))
        raw = path.read_bytes() if data is None else data.encode()
        found[rel] = hashlib.sha256(raw).hexdigest()
    return found


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory) -> Path:
    """Version 1 of two parts (FnApiRunner) in base/; a third part added to the inputs;
    version 2 from it on the FnApiRunner in fnapi/, a copy of base/."""
    folder = tmp_path_factory.mktemp("refresh")
    raw = folder / "raw"
    raw.mkdir()
    third = len(EN) // 3
    for k in range(3):
        part = slice(k * third, (k + 1) * third)
        if k == 2:
            assert main(["refresh", str(refresh_config(raw, folder / "base", IN_MEMORY))]) == 0
        for lang, side in (("en", EN[part]), ("zh", ZH[part])):
            (raw / f"part{k}.{lang}").write_text("\n".join(side) + "\n", encoding="utf-8")
    shutil.copytree(folder / "base", folder / "fnapi")
    assert main(["refresh", str(refresh_config(raw, folder / "fnapi", IN_MEMORY))]) == 0
    assert versions.published(str(folder / "fnapi")) == [1, 2]
    return folder


def test_a_refresh_that_adds_a_part_gives_the_fnapi_bytes(cluster: Cluster, refreshed, capsys):
    root = refreshed / f"on-{cluster.name}"
    shutil.copytree(refreshed / "base", root)
    capsys.readouterr()
    before = cluster.finished()
    assert main(["refresh", str(refresh_config(refreshed / "raw", root, cluster.options))]) == 0
    report = capsys.readouterr().err
    assert "added    1: " in report and "prepared 1 part(s), encoded 1" in report
    assert cluster.new_jobs(before, 2) >= 2  # the new part's prepare and encode
    assert versions.published(str(root)) == [1, 2]
    assert tree_digests(root) == tree_digests(refreshed / "fnapi")


# -- a worker lost ------------------------------------------------------------------------

# The component whose process group dies: Flink's (first) TaskManager, Spark's worker
# and its executor.
VICTIM = {"flink": "taskmanager", "spark": "worker"}


def victim(cluster: Cluster) -> int:
    """The process group of the component that dies (`taskmanager`, or `taskmanager-1`
    of a cluster started with several)."""
    pids = find_cluster(cluster.name).pids
    return pids.get(VICTIM[cluster.name]) or pids[f"{VICTIM[cluster.name]}-1"]


# The deadline of the step whose worker is lost: Spark's job waits for a new one. It
# counts from the job's start; the job is killed once it runs, and on a warm cluster the
# whole step takes about 13 s.
DEADLINE_S = 30


def prepare_command(corpus: Path, output: Path, beam: list[str]) -> list[str]:
    return [sys.executable, "-m", "nmtpipe", "prepare", "--src-lang", "en", "--tgt-lang", "zh",
            "--trainpref", str(corpus), "--valid-fraction", "0.03", "--test-fraction", "0.03",
            "--learn-pairs", str(LEARN_PAIRS), "--output", str(output), *beam]  # fmt: skip


def test_a_worker_killed_during_prepare_fails_it_in_one_line_then_a_rerun_is_identical(
    cluster: Cluster, reference
):
    """SIGKILL to a TaskManager (Flink) or the worker (Spark) once the job runs.

    Flink fails the job at once (batch jobs get no restart). Spark
    waits for an executor that never comes (its scheduler has no such deadline): the step
    gives up at its --job_deadline, cancelling the job.
    """
    output = reference / f"killed-{cluster.name}"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    deadline = ["--job_deadline", f"{DEADLINE_S}s"]
    proc = subprocess.Popen(
        prepare_command(reference / "train", output, [*cluster.options, *deadline]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not cluster.running():
            assert proc.poll() is None and time.monotonic() < deadline, "the job never ran"
            time.sleep(0.2)
        os.killpg(victim(cluster), signal.SIGKILL)
        _, err = proc.communicate(timeout=DEADLINE_S + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if local_cluster("options", cluster.name).returncode != 0:
            restarted = local_cluster("restart", cluster.name, timeout=300)
            assert restarted.returncode == 0, restarted.stderr
    assert proc.returncode == 1, err
    # One line, the last: the engine's first error (the lost TaskManager, or a channel to it
    # that broke; Beam's log no longer repeats it), or the deadline's.
    lines = err.strip().splitlines()
    says = {
        "flink": "nmtpipe prepare: error: the Beam job failed on PortableRunner: ",
        "spark": "nmtpipe prepare: error: the Beam job on PortableRunner did not finish within "
        f"{duration_text(DEADLINE_S)} (--job_deadline); it was cancelled and nothing was committed",
    }[cluster.name]
    assert [line for line in lines if line.startswith("nmtpipe")] == [lines[-1]], err
    assert lines[-1].startswith(says), err
    assert not (output / "manifest.json").exists()
    if cluster.name == "spark":  # its lost worker back, as it was started
        restarted = local_cluster("restart", cluster.name, timeout=300)
        assert restarted.returncode == 0, restarted.stderr
    # The cluster again (as it was started): the same command gives the FnApiRunner's bytes.
    assert local_cluster("options", cluster.name).returncode == 0
    before = cluster.finished()
    rerun = subprocess.run(
        prepare_command(reference / "train", output, cluster.options),
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert cluster.new_jobs(before, 1) == 1
    assert digests(output) == digests(reference / "fnapi/prepared")
    result = command_result(rerun.stdout)
    expected = json.loads((reference / "fnapi/prepared/stats.json").read_text())
    assert counts(json.loads((output / "stats.json").read_text())) == counts(expected)
    assert counts(result["stats"]) == counts(expected)  # what the command reported
