"""Training with real torchrun/gloo processes: learning, DDP = one process, exact resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nmtpipe.pipelines.cli.main import main
from nmtpipe.trainers.runtime import checkpoint
from tests.helpers import command_result, encode_example, train_records

UPDATES, SAVE_AT = 24, 12
NMTPIPE = [sys.executable, "-m", "nmtpipe"]


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    return encode_example(tmp_path_factory.mktemp("train"))


def train_args(data, save_dir, *more) -> list[str]:
    return [
        "train", "--data", data, "--save-dir", str(save_dir), "--arch", "transformer_tiny",
        "--max-tokens", "1024", "--max-update", str(UPDATES), "--dropout", "0",
        "--lr", "3e-3", "--warmup-updates", "6", "--log-interval", "1",
        "--save-interval-updates", str(SAVE_AT), "--validate-interval-updates", str(UPDATES),
        *more,
    ]  # fmt: skip


def losses(save_dir) -> dict[int, float]:
    """Each update's loss, as the run in `save_dir` kept it in train_log.jsonl."""
    return {r["update"]: r["loss"] for r in train_records(save_dir) if "loss" in r}


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def ddp(encoded, tmp_path_factory):
    """An uninterrupted two-process gloo run (through `--nproc 2`, i.e. torchrun): its
    save dir and stdout."""
    save_dir = tmp_path_factory.mktemp("ddp") / "ckpt"
    args = train_args(encoded, save_dir, "--nproc", "2", "--eval-bleu")
    return save_dir, run([*NMTPIPE, *args]).stdout


def test_two_process_ddp_learns_and_equals_one_process(encoded, ddp, tmp_path):
    save_dir, stdout = ddp
    curve = losses(save_dir)
    assert sorted(curve) == list(range(1, UPDATES + 1))
    summary = command_result(stdout)
    assert summary["updates"] == UPDATES and summary["valid_loss"] < 0.75 * curve[1]
    # One process with two micro-batches per update sees the same global batches.
    args = train_args(encoded, tmp_path / "single", "--update-freq", "2", "--eval-bleu")
    single = run([*NMTPIPE, *args])
    # BLEU: each rank translates its share of the validation split, the statistics summed.
    single_summary = command_result(single.stdout)
    assert single_summary["valid_bleu"] == pytest.approx(summary["valid_bleu"], abs=1.0)
    single_curve = losses(tmp_path / "single")
    assert sorted(single_curve) == sorted(curve)
    for update, loss in single_curve.items():
        assert loss == pytest.approx(curve[update], rel=2e-3), update


# Runs `nmtpipe train` as a torchrun rank; rank 0 SIGKILLs itself right after saving the
# checkpoint of update SAVE_AT, so the job dies with the other rank mid-training.
_DIE_AFTER_SAVE = """
import os, signal, sys
from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.pipelines.cli.main import main

save = checkpoint.save

def save_then_die(url, state):
    save(url, state)
    if url.endswith("checkpoint_last.pt") and state["position"]["update"] == {save_at}:
        os.kill(os.getpid(), signal.SIGKILL)

checkpoint.save = save_then_die
sys.exit(main(sys.argv[1:]))
"""


def test_a_killed_job_resumes_at_the_exact_batch(encoded, ddp, tmp_path):
    script = tmp_path / "die.py"
    script.write_text(_DIE_AFTER_SAVE.format(save_at=SAVE_AT))
    save_dir = tmp_path / "ckpt"
    killed = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(script), *train_args(encoded, save_dir)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert killed.returncode != 0
    assert checkpoint.load(str(save_dir / "checkpoint_last.pt"))["position"]["update"] == SAVE_AT
    run([*NMTPIPE, *train_args(encoded, save_dir, "--nproc", "2")])
    after = losses(save_dir)
    assert sorted(after) == list(range(SAVE_AT + 1, UPDATES + 1))  # nothing repeated or lost
    reference = losses(ddp[0])
    for update, loss in after.items():  # the same batches in the same order, same weights
        assert loss == pytest.approx(reference[update], rel=1e-4), update
    assert os.path.exists(save_dir / "checkpoint_best.pt")


def test_bad_inputs_and_incompatible_checkpoints(encoded, tmp_path, capsys):
    code = main([*train_args(str(tmp_path / "none"), tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 1 and "holds no committed encode output" in err
    # Too-long pairs are skipped and counted; TensorBoard gets the scalars.
    short = [*train_args(encoded, tmp_path / "short"), "--max-update", "2"]
    short[short.index("--max-tokens") + 1] = "16"
    assert main([*short, "--tensorboard-logdir", str(tmp_path / "tb")]) == 0
    summary = command_result(capsys.readouterr().out)
    assert summary["skipped_too_long"] > 0 and 0 < summary["data_share"] < 1
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    # The same save dir with another model shape is refused.
    other = [*train_args(encoded, tmp_path / "short"), "--arch", "transformer_small"]
    assert main(other) == 1
    assert "is a model of another shape" in capsys.readouterr().err


def test_a_corrupt_shard_is_a_clear_error(encoded, tmp_path, capsys):
    import shutil

    copy = tmp_path / "encoded"
    shutil.copytree(encoded, copy)
    shard = copy / "fairseq" / "train.en-zh.zh.bin"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert main(train_args(str(copy), tmp_path / "c", "--format", "fairseq")) == 1
    err = capsys.readouterr().err
    assert "train.en-zh.zh.bin is corrupted: its sha256 is" in err
    assert "rebuild it: nmtpipe encode ... --output" in err and "Traceback" not in err


def test_an_uneven_epoch_over_two_ranks_does_not_hang(encoded, tmp_path):
    from nmtpipe.trainers.data.batching import epoch_batches
    from nmtpipe.transforms.formats.encoded_dataset import open_dataset

    train = open_dataset(encoded)["train"]
    # A budget whose epoch has an odd number of batches: one rank gets a repeated batch.
    budget = next(
        t for t in range(4096, 8192, 8)
        if epoch_batches(train.src_sizes, train.tgt_sizes, t, 1, 1, world=2).repeated == 1
    )  # fmt: skip
    batches = len(epoch_batches(train.src_sizes, train.tgt_sizes, budget, 1, 1, world=2).batches)
    args = train_args(encoded, tmp_path / "c", "--nproc", "2", "--max-epoch", "1")
    args[args.index("--max-tokens") + 1] = str(budget)
    args[args.index("--max-update") + 1] = "1000"
    summary = command_result(run([*NMTPIPE, *args]).stdout)
    assert summary["updates"] == batches // 2 and summary["epoch"] == 2


def test_a_checkpoint_of_another_vocabulary_is_refused(encoded, tmp_path, capsys):
    import torch

    args = [*train_args(encoded, tmp_path / "c"), "--max-update", "1"]
    assert main(args) == 0
    last = tmp_path / "c" / "checkpoint_last.pt"
    state = torch.load(last, weights_only=True)
    state["vocab_fingerprint"] = "0" * 64
    torch.save(state, last)
    capsys.readouterr()
    assert main([*args[:-1], "2"]) == 1
    assert (
        "was trained with another vocabulary (fingerprint 000000000000" in capsys.readouterr().err
    )


def test_early_stopping_and_checkpoints_on_s3(encoded, tmp_path, capsys, s3):
    # With a learning rate of 0 the validation loss never improves: patience 2 stops the
    # run at the third validation.
    args = [*train_args(encoded, f"{s3}/ckpt"), "--lr", "0", "--validate-interval-updates", "1",
            "--patience", "2", "--max-update", "50"]  # fmt: skip
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert command_result(out)["updates"] == 3
    assert "validation at update 3 (epoch 1): loss " in err  # a line for people per validation
    import s3fs

    names = sorted(p.rsplit("/", 1)[-1] for p in s3fs.S3FileSystem().ls("nmtpipe-test/ckpt"))
    assert names == [
        "checkpoint_best.pt", "checkpoint_last.pt", "learning_curve.json", "learning_curve.svg",
        "train_log.jsonl", "train_summary.json",
    ]  # fmt: skip
    # The records are kept beside the checkpoints.
    kept = s3fs.S3FileSystem().cat("nmtpipe-test/ckpt/train_log.jsonl").decode().splitlines()
    assert [json.loads(line)["update"] for line in kept if "valid_loss" in line] == [1, 2, 3]
    # Resuming from S3 continues where it stopped (patience already ran out: no update).
    assert main(args) == 0
    summary = command_result(capsys.readouterr().out)
    assert summary["resumed"] and summary["updates"] == 3


def test_bleu_picks_the_best_checkpoint_and_the_run_leaves_curves_and_an_average(
    encoded, tmp_path, capsys
):
    save_dir = tmp_path / "c"
    args = [*train_args(encoded, save_dir), "--max-update", "12", "--save-interval-updates", "6",
            "--validate-interval-updates", "6", "--best-checkpoint-metric", "bleu",
            "--average-last", "2"]  # fmt: skip
    assert main(args) == 0
    stdout = capsys.readouterr().out
    bleu = {r["update"]: r["valid_bleu"] for r in train_records(save_dir) if "valid_bleu" in r}
    assert sorted(bleu) == [6, 12] and all(0 <= b <= 100 for b in bleu.values())
    best = checkpoint.load(str(save_dir / "checkpoint_best.pt"))
    assert best["best_metric"] == "bleu" and best["best"] == max(bleu.values())
    summary = command_result(stdout)
    assert summary["best_valid_bleu"] == max(bleu.values())
    # The learning curves: the points of every log and validation, and their drawing.
    points = json.loads((save_dir / "learning_curve.json").read_text())
    assert [p["update"] for p in points if "valid_bleu" in p] == [6, 12]
    assert {p["update"] for p in points if "loss" in p} == set(range(1, 13))
    svg = (save_dir / "learning_curve.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    for panel in ("loss", "learning rate", "validation BLEU"):
        assert panel in svg
    # The average of the last two numbered checkpoints decodes like any checkpoint.
    averaged = checkpoint.load(str(save_dir / "checkpoint_avg.pt"))
    assert averaged["averaged"] == ["checkpoint1_6.pt", "checkpoint1_12.pt"]
    decode = ["decode", "--checkpoint", str(save_dir / "checkpoint_avg.pt"), "--output",
              str(tmp_path / "decoded"), "--max-len-a", "0", "--max-len-b", "4"]  # fmt: skip
    assert main(decode) == 0


def test_a_finished_run_says_so_and_other_data_needs_reset_data(encoded, tmp_path, capsys):
    import shutil

    args = [*train_args(encoded, tmp_path / "c"), "--max-update", "2"]
    assert main(args) == 0
    last = tmp_path / "c" / "checkpoint_last.pt"
    before = last.read_bytes()
    capsys.readouterr()
    assert main(args) == 0  # at --max-update already: no "0 target tokens/s"
    err = capsys.readouterr().err
    assert "already trained: 2 updates reached --max-update 2" in err
    assert "raise --max-update" in err and "tokens/s" not in err
    assert last.read_bytes() == before  # a finished run's checkpoint is left as it was
    # The same checkpoint on other data (here: the same shards, re-fingerprinted) is
    # refused, naming both fingerprints, unless --reset-data.
    other = tmp_path / "other"
    shutil.copytree(encoded, other)
    doc = json.loads((other / "manifest.json").read_text())
    theirs, doc["fingerprint"] = doc["fingerprint"], "e" * 64
    (other / "manifest.json").write_text(json.dumps(doc))
    moved = [*train_args(str(other), tmp_path / "c"), "--max-update", "3"]
    assert main(moved) == 1
    err = capsys.readouterr().err
    assert f"was trained on other data (fingerprint {theirs[:12]})" in err
    assert "(fingerprint eeeeeeeeeeee); pass --reset-data" in err
    assert main([*moved, "--reset-data"]) == 0
    assert command_result(capsys.readouterr().out)["updates"] == 3


def _rank_pid(rank: int, job: str) -> int | None:
    """The pid of torchrun rank `rank` of the `nmtpipe train --nproc` job whose
    environment holds NMTPIPE_TEST_JOB=`job` (never another job's on this machine)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        ours = b"nmtpipe.pipelines.cli.rank" in cmdline and b"--torchrun" not in cmdline
        mine = f"NMTPIPE_TEST_JOB={job}".encode() in environ
        if ours and mine and f"RANK={rank}".encode() in environ:
            return int(entry)
    return None


def test_a_rank_killed_by_a_signal_is_one_line(encoded, tmp_path):
    import signal
    import time

    save_dir = tmp_path / "c"
    args = train_args(encoded, save_dir, "--nproc", "2", "--save-interval-updates", "2")
    args[args.index("--max-update") + 1] = "100000"
    job = str(tmp_path)
    proc = subprocess.Popen(
        [*NMTPIPE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NMTPIPE_TEST_JOB": job},
    )  # fmt: skip
    try:
        pid = None
        for _ in range(1200):  # until the first checkpoint is there (bounded, 0.1 s steps)
            if (save_dir / "checkpoint_last.pt").exists():
                pid = _rank_pid(1, job)
                break
            time.sleep(0.1)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1] == (
        "nmtpipe train: error: rank 1 of 2 died (killed by SIGKILL); re-running the same "
        f"command resumes from the last checkpoint in {save_dir}"
    )
    assert "Traceback" not in err and "ChildFailedError" not in err
