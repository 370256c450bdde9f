"""The README's multi-node torchrun command on two "machines" (network namespaces joined
by a veth): the same losses and translations as two ranks on one machine, and a rank
killed on the second machine ends the job on both with one line, a rerun resuming.

Each namespace has only `lo` and the veth, and this machine's hostname resolves to a
loopback address (as on Debian, `127.0.1.1`): each node therefore names its own address
(`--local_addr`, GLOO_SOCKET_IFNAME) and the first says that it hosts the rendezvous
(`--rdzv_conf is_host=1`), as such machines need.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nmtpipe.pipelines.cli.main import main
from nmtpipe.trainers.runtime.distributed import peer_failure
from tests import netns
from tests.helpers import command_result, encode_example, train_records

UPDATES, SAVE_AT = 8, 2
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
PORT = 29500
# Two ranks on one host: `nmtpipe ... --nproc 2` runs this too, through one more process.
ONE_HOST = [TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "nmtpipe"]
# A line of nmtpipe's own (`nmtpipe train: error: ...`), not torchrun's "nmtpipe FAILED".
NMTPIPE_LINE = re.compile(r"^nmtpipe( \w+)?: ")
# How long a job may take to end once a rank is killed: a hang fails the test.
ENDS_WITHIN = 60


@pytest.fixture(scope="module")
def encoded(tmp_path_factory) -> str:
    return encode_example(tmp_path_factory.mktemp("two_hosts"))


@pytest.fixture(scope="module")
def hosts() -> Iterator[tuple[netns.Host, netns.Host]]:
    why = netns.unavailable()
    if why is not None:
        pytest.skip(f"two hosts need network namespaces: {why}")
    with netns.two_hosts() as pair:
        yield pair


def train_args(data: str, save_dir: Path) -> list[str]:
    return [
        "train", "--data", data, "--save-dir", str(save_dir), "--arch", "transformer_tiny",
        "--max-tokens", "1024", "--max-update", str(UPDATES), "--dropout", "0",
        "--lr", "3e-3", "--warmup-updates", "6", "--log-interval", "1",
        "--save-interval-updates", str(SAVE_AT), "--validate-interval-updates", str(UPDATES),
        "--quiet",
    ]  # fmt: skip


def decode_args(checkpoint: Path, output: Path) -> list[str]:
    return [
        "decode", "--checkpoint", str(checkpoint), "--output", str(output), "--split", "valid",
        "--max-len-a", "1", "--max-len-b", "5", "--quiet",
    ]  # fmt: skip


def start_two_nodes(
    hosts: tuple[netns.Host, netns.Host], args: list[str]
) -> list[subprocess.Popen]:
    """The README's command on both hosts, one rank each, the first hosting the
    rendezvous at its veth address."""
    head = hosts[0].address
    procs = []
    for host in hosts:
        torchrun = [
            TORCHRUN, "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"{head}:{PORT}", "--local_addr", host.address,
            *(["--rdzv_conf", "is_host=1"] if host is hosts[0] else []),
            "-m", "nmtpipe", *args,
        ]  # fmt: skip
        env = {"GLOO_SOCKET_IFNAME": host.interface, "OMP_NUM_THREADS": "1"}
        command = host.command(torchrun, env)
        procs.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    return procs


def wait(procs: list[subprocess.Popen], timeout: float = 300) -> list[tuple[int, str, str]]:
    """Each process's exit code, stdout and stderr (all of them killed on a timeout)."""
    deadline = time.monotonic() + timeout
    try:
        outs = [p.communicate(timeout=max(deadline - time.monotonic(), 1)) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs, strict=True)]


def ok(results: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    for code, _, err in results:
        assert code == 0, err[-3000:]
    return results


def one_host_env() -> dict[str, str]:
    # As `--nproc 2` sets it (and torchrun would, with a banner about it).
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def losses(save_dir: Path) -> list[tuple[int, float]]:
    """(update, loss) of each update the run in `save_dir` kept in its train_log.jsonl."""
    return [(r["update"], r["loss"]) for r in train_records(save_dir) if "loss" in r]


def rank_pids(host: netns.Host) -> list[int]:
    """The torchrun ranks (not the agent) running in `host`'s namespace."""
    pids = []
    for pid in host.pids():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(entry.startswith(b"LOCAL_RANK=") for entry in environ):
            pids.append(pid)
    return pids


@pytest.fixture(scope="module")
def runs(encoded, hosts, tmp_path_factory) -> dict:
    """Two ranks on one host, and beside them the same job on two hosts whose second
    host's rank is SIGKILLed once the first checkpoint is written; then the same two
    commands again."""
    folder = tmp_path_factory.mktemp("runs")
    save_dir = folder / "two_hosts"
    reference = subprocess.Popen(
        [*ONE_HOST, *train_args(encoded, folder / "one_host")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=one_host_env(),
    )  # fmt: skip
    try:
        nodes = start_two_nodes(hosts, train_args(encoded, save_dir))
        for _ in range(3000):  # until the first checkpoint is there (bounded, 0.02 s steps)
            if (save_dir / "checkpoint_last.pt").exists() or any(p.poll() for p in nodes):
                break
            time.sleep(0.02)
        victims = rank_pids(hosts[1])
        assert len(victims) == 1, victims
        os.kill(victims[0], signal.SIGKILL)
        killed_at = time.monotonic()
        killed = wait(nodes, timeout=ENDS_WITHIN)
        ended_after = time.monotonic() - killed_at
        before = losses(save_dir)  # what the killed job kept: up to its last checkpoint
        resumed = ok(wait(start_two_nodes(hosts, train_args(encoded, save_dir))))
    finally:
        ok(wait([reference]))
    return {
        "save_dir": save_dir,
        "reference": losses(folder / "one_host"),
        "killed": killed,
        "ended_after": ended_after,
        "before": before,
        "resumed": resumed,
    }


@pytest.mark.slow
def test_two_hosts_train_with_the_losses_of_one(runs):
    reference = dict(runs["reference"])
    assert list(reference) == list(range(1, UPDATES + 1))
    # The killed job's records up to its checkpoint, then the rerun's from there.
    kept = losses(runs["save_dir"])
    assert kept[: len(runs["before"])] == runs["before"]
    assert [update for update, _ in kept] == list(reference)
    for update, loss in kept:
        assert loss == pytest.approx(reference[update], rel=1e-6), update


@pytest.mark.slow
def test_a_rank_killed_on_the_second_host_ends_both_with_one_line_and_a_rerun_resumes(runs):
    (code_a, _, err_a), (code_b, _, _) = runs["killed"]
    assert code_a != 0 and code_b != 0
    assert runs["ended_after"] < ENDS_WITHIN
    ours = [line for line in err_a.splitlines() if NMTPIPE_LINE.match(line)]
    assert len(ours) == 1, err_a[-3000:]
    assert ours[0].startswith(
        "nmtpipe train: error: lost the connection to another rank of the job ("
    ), ours[0]
    assert ours[0].endswith(
        f"re-running the same command resumes from the last checkpoint in {runs['save_dir']}"
    )
    # The same two commands again: from the last checkpoint to the end.
    stopped = len(runs["before"])
    assert stopped >= SAVE_AT and stopped % SAVE_AT == 0 and stopped < UPDATES
    summary = command_result(runs["resumed"][0][1])
    assert summary["resumed"] and summary["updates"] == UPDATES


@pytest.mark.slow
def test_two_hosts_decode_like_one(runs, hosts, tmp_path):
    checkpoint = runs["save_dir"] / "checkpoint_last.pt"
    two = start_two_nodes(hosts, decode_args(checkpoint, tmp_path / "two_hosts"))
    try:  # meanwhile one rank here (what a sentence becomes depends on no batch or rank)
        assert main(decode_args(checkpoint, tmp_path / "one_host")) == 0
    finally:
        ok(wait(two))
    one_hyps, one_nbest, one_scores = outputs(tmp_path / "one_host")
    two_hyps, two_nbest, two_scores = outputs(tmp_path / "two_hosts")
    assert two_hyps == one_hyps and len(one_hyps) > 5
    assert [r["id"] for r in two_nbest] == [r["id"] for r in one_nbest]
    assert two_scores["world"] == 2 and two_scores["bleu"] == one_scores["bleu"]


def outputs(folder: Path) -> tuple[list[str], list[dict], dict]:
    hyps = (folder / "hypotheses.txt").read_text(encoding="utf-8").split("\n")[:-1]
    nbest = [json.loads(x) for x in (folder / "nbest.jsonl").read_text().splitlines()]
    return hyps, nbest, json.loads((folder / "scores.json").read_text())


# What gloo raised in this test's runs, word for word.
_CLOSED = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
    "by peer [10.233.0.2]:10967. This is typically caused by a remote worker crashing. Check "
    "the logs of the remote worker before reporting an error. GLHF! \N{UMBRELLA ON GROUND}"
)
_RESET = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
    "[10.233.0.2]:54406: Connection reset by peer. This is typically caused by a remote worker "
    "hanging or bugs in the application."
)
_NO_CONNECT = (
    "Gloo connectFullMesh failed with [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/"
    "tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, "
    "remote=[127.0.0.1]:26014$0"
)


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (RuntimeError(_CLOSED), "Connection closed by peer [10.233.0.2]:10967"),
        (RuntimeError(_RESET), "Read error [10.233.0.2]:54406: Connection reset by peer"),
        (
            RuntimeError(_NO_CONNECT),
            "Gloo connectFullMesh failed with timed out connecting: SO_ERROR: Connection "
            "refused, remote=[127.0.0.1]:26014$0",
        ),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), None),
        (ValueError(_CLOSED), None),
    ],
)
def test_only_the_network_between_ranks_failing_is_a_peer_failure(error, said):
    assert peer_failure(error) == said
