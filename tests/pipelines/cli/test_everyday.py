"""Ordinary mistakes and their leftovers, run as a user runs them: each ends in one line
naming the cause, the path and the option (exit 2 for a usage mistake), and leaves no
output folder, staging or scratch files behind."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nmtpipe.pipelines.cli.main import main
from tests.flaky_fs import FullMemoryFileSystem
from tests.helpers import IN_MEMORY, example_lines, write_pair

NMTPIPE = [sys.executable, "-m", "nmtpipe"]


def run_cli(capsys, *args: str | Path) -> tuple[int, list[str]]:
    """`nmtpipe ARGS` in this process: its exit code and the lines it printed on stderr,
    but the progress lines before them (in a log, each after the time it was written)."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    return code, [line for line in err if not re.match(r"\d{4}-\d\d-\d\d \d\d:", line)]


def test_a_corpus_file_given_as_prepared_is_a_usage_mistake(capsys, small_corpus, tmp_path):
    corpus = f"{small_corpus}.en"
    out = tmp_path / "vocab"
    code, err = run_cli(capsys, "vocab", "--prepared", corpus, "--output", out, *IN_MEMORY)
    assert (code, err) == (2, [
        f"nmtpipe vocab: error: --prepared {corpus} is a file, not a folder: --prepared "
        "wants a prepare output (a prepared dataset), the folder nmtpipe prepare writes"
    ])  # fmt: skip
    assert not out.exists()


def test_a_prepare_output_given_as_vocab_names_the_option(capsys, tiny_model, tmp_path):
    prepared, out = tiny_model["prepared"], tmp_path / "encoded"
    code, err = run_cli(
        capsys, "encode", "--prepared", prepared, "--vocab", prepared, "--output", out, *IN_MEMORY
    )
    assert (code, err) == (2, [
        f"nmtpipe encode: error: --vocab {prepared} is a prepare output (a prepared dataset): "
        "--vocab wants a vocab output (a vocabulary), the folder nmtpipe vocab writes"
    ])  # fmt: skip
    assert not out.exists()


def test_a_checkpoints_folder_means_its_best_checkpoint(capsys, tiny_model, tmp_path):
    (tmp_path / "in.en").write_text("Good morning.\n", encoding="utf-8")
    save_dir = tiny_model["save_dir"]
    assert main(["translate", "--checkpoint", save_dir, "--input", str(tmp_path / "in.en"),
                 "--max-len-a", "0", "--max-len-b", "4"]) == 0  # fmt: skip
    said = f" --checkpoint {save_dir} is a folder: using {save_dir}/checkpoint_best.pt\n"
    assert said in capsys.readouterr().err
    # A folder without a best checkpoint: what it holds, to choose from.
    only_last = tmp_path / "ckpt"
    only_last.mkdir()
    shutil.copy(Path(save_dir) / "checkpoint_last.pt", only_last)
    code, err = run_cli(capsys, "translate", "--checkpoint", only_last)
    assert (code, err) == (2, [
        f"nmtpipe translate: error: --checkpoint {only_last} is a folder, not a checkpoint "
        "file; give a checkpoint in it: checkpoint_last.pt"
    ])  # fmt: skip


def test_a_split_the_data_lacks_is_a_usage_mistake_with_the_nearest(capsys, tiny_model, tmp_path):
    out = tmp_path / "decoded"
    code, err = run_cli(capsys, "decode", "--checkpoint", tiny_model["checkpoint"],
                        "--split", "tets", "--output", out)  # fmt: skip
    assert code == 2
    assert err[-1] == (
        f"nmtpipe decode: error: --split tets: {tiny_model['encoded']} has no split 'tets' "
        "(did you mean test?); it has test, train, valid"
    )
    assert not out.exists()


@pytest.mark.slow
def test_a_usage_mistake_on_two_ranks_is_one_line(tiny_model, tmp_path):
    """Every rank meets the mistake; the command says it once, after they have ended."""
    done = subprocess.run(
        [*NMTPIPE, "decode", "--checkpoint", tiny_model["checkpoint"], "--split", "tets",
         "--output", str(tmp_path / "decoded"), "--nproc", "2", "--quiet"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [
        f"nmtpipe decode: error: --split tets: {tiny_model['encoded']} has no split 'tets' "
        "(did you mean test?); it has test, train, valid"
    ])  # fmt: skip


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (pickle.dumps({"model": {"w": [1.0]}}), "it is a plain pickle"),
        (b"", "it is empty"),
    ],
    ids=["pickle", "empty"],
)
def test_a_file_that_is_no_checkpoint_says_so(capsys, tmp_path, content, said):
    given = tmp_path / "model.pt"
    given.write_bytes(content)
    code, err = run_cli(capsys, "decode", "--checkpoint", given, "--output", tmp_path / "o")
    assert (code, err) == (1, [
        f"nmtpipe decode: error: {given} is not an nmtpipe checkpoint: {said}, not the zip "
        "archive torch.save writes; give one nmtpipe train wrote (a --save-dir's "
        "checkpoint_best.pt, checkpoint_last.pt or a numbered one)"
    ])  # fmt: skip
    assert not (tmp_path / "o").exists()


def test_a_refused_export_leaves_no_output_folder(capsys, tiny_model, tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "exports" / "hf"
    code, err = run_cli(capsys, "export", "--checkpoint", tiny_model["checkpoint"], "--output", out)
    assert code == 2 and len(err) == 1
    assert "uses a Tensor2Tensor SubwordTextEncoder vocabulary" in err[0]
    assert not (tmp_path / "exports").exists()


def test_an_input_in_a_bucket_that_does_not_exist_says_so(capsys, tmp_path, s3):
    code, err = run_cli(capsys, "prepare", "-s", "en", "-t", "zh", "--trainpref",
                        "s3://nmtpipe-tset/train", "--output", tmp_path / "p",
                        *IN_MEMORY)  # fmt: skip
    assert (code, err) == (1, [
        "nmtpipe prepare: error: --trainpref s3://nmtpipe-tset/train: the bucket nmtpipe-tset "
        "does not exist; correct its name"
    ])  # fmt: skip
    assert not (tmp_path / "p").exists()


def test_a_full_disk_names_the_file_and_leaves_nothing(capsys, tiny_model):
    """The disk fills up while encode writes its shards: one line naming the file that
    could not be written; what was written before it is removed."""
    FullMemoryFileSystem.reset(capacity=20_000)
    out = "fullfs://encoded"
    code, err = run_cli(capsys, "encode", "--prepared", tiny_model["prepared"], "--vocab",
                        tiny_model["vocab"], "--output", out, *IN_MEMORY)  # fmt: skip
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(f"nmtpipe encode: error: could not write {out}/")
    assert err[0].endswith(
        ": no space left on device; nothing was committed and what was written is removed: "
        "free space on that disk, or write elsewhere, and run again"
    )
    assert FullMemoryFileSystem.written > 0  # it wrote files before the disk was full
    assert FullMemoryFileSystem().find("/encoded") == []


# Runs `nmtpipe` in-process with a T2T build that kills the process right after it
# spilled its first chunks to disk.
_DIE_AFTER_SPILLING = """
import os, signal, sys
from nmtpipe.transforms.vocab.kinds import token_chunks
from nmtpipe.pipelines.cli.main import main

escape = token_chunks.TokenChunks.escape

def escape_then_die(self, alphabet):
    escape(self, alphabet)
    assert self.spilled
    os.kill(os.getpid(), signal.SIGKILL)

token_chunks.TokenChunks.escape = escape_then_die
sys.exit(main(sys.argv[1:]))
"""


def _scratch(folder: Path) -> list[Path]:
    return sorted(folder.rglob("nmtpipe-t2t-*"))


@pytest.mark.parametrize("store", ["local", "s3"])
def test_a_killed_t2t_build_leaves_its_spill_to_the_next_run(tmp_path, store, request):
    """SIGKILL leaves the spilled chunks (under the output's staging, or TMPDIR where the
    output is remote); the next run removes them, and its own."""
    prepared = tmp_path / "prepared"
    corpus = write_pair(tmp_path / "train", example_lines("tatoeba-cmn", "en")[::8],
                        example_lines("tatoeba-cmn", "zh")[::8])  # fmt: skip
    assert main(["prepare", "-s", "en", "-t", "zh", "--trainpref", str(corpus),
                 "--output", str(prepared), *IN_MEMORY, "--quiet"]) == 0  # fmt: skip
    output = str(tmp_path / "vocab")
    if store == "s3":
        output = f"{request.getfixturevalue('s3')}/vocab"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    args = ["vocab", "--prepared", str(prepared), "--vocab-size", "500", "--joined",
            "--max-characters", "20000", "--output", output, *IN_MEMORY]  # fmt: skip
    killed = subprocess.run([sys.executable, "-c", _DIE_AFTER_SPILLING, *args],
                            capture_output=True, text=True, timeout=300, env=env,
                            check=False)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = _scratch(tmp_path)
    assert len(left) == 1 and list(left[0].iterdir())
    assert (left[0].parent == tmp) == (store == "s3")
    rerun = subprocess.run([*NMTPIPE, *args], capture_output=True, text=True, timeout=300,
                           env=env, check=False)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert _scratch(tmp_path) == []
    assert "chunks on local disk" in rerun.stderr  # the rerun spilled too, and removed it
