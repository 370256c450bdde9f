"""A cluster on three hosts made of network namespaces (tests/netns.py), with an S3
server: what tests/clusters/test_hosts.py runs on, and benchmarks/data/bench_clusters.py
measures (`python -m tests.clusters.namespace_cluster ENGINE -- COMMAND`).

The first host runs the head (`scripts/local-cluster start ENGINE --role head`: Flink's
JobManager or Spark's master, and Beam's job server) and an S3 server (moto); each of
the other two a TaskManager or Spark worker beside a Beam worker pool (`--role worker`),
with the README's commands. The hosts share this machine's file system and processes,
not its network: a worker reaches the head, the job server and S3 only at the first
host's address.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests import netns

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "local-cluster"
SUBNET = "10.234.0"
S3_PORT = 5555
BUCKET = "s3://nmtpipe-hosts"
# What a worker pool logs for each SDK worker process it starts.
STARTED_WORKER = "started worker"


@dataclass(frozen=True)
class Hosts:
    """A running cluster on the namespace hosts, and how to run commands on them."""

    engine: str
    head: netns.Host
    workers: tuple[netns.Host, ...]
    env: dict[str, str]  # every host's: S3's address and keys, the python to use
    state: Path  # one local-cluster state folder per host below it
    options: list[str]  # the Beam options `--role head` printed

    def command(self, host: netns.Host, argv: list[str]) -> list[str]:
        """`argv` on `host`, with every host's settings and its own local-cluster state."""
        return host.command(
            argv, dict(self.env, NMTPIPE_CLUSTER_STATE=str(self.state / host.namespace))
        )

    def run(self, host: netns.Host, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(host, argv), capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip

    def start(self, host: netns.Host, argv: list[str], log: Path | None = None) -> subprocess.Popen:
        """`argv` started on `host`: its output read by the caller, or appended to `log`
        (a pipe nobody reads would stop it once full)."""
        if log is None:
            return subprocess.Popen(self.command(host, argv), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)  # fmt: skip
        with open(log, "ab") as out:
            return subprocess.Popen(self.command(host, argv), stdout=out, stderr=out)

    def local_cluster(self, host: netns.Host, *args: str) -> subprocess.CompletedProcess:
        return self.run(host, [sys.executable, str(SCRIPT), *args], timeout=400)

    def python(self, code: str) -> str:
        """`code`'s stdout, run on the head (the only place S3 can be reached from)."""
        done = self.run(self.head, [sys.executable, "-c", code], timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def pool_log(self, host: netns.Host) -> Path:
        return self.state / host.namespace / self.engine / "logs" / "worker-pool.log"

    def pids(self, host: netns.Host) -> dict[str, int]:
        found = self.local_cluster(host, "options", self.engine, "--json")
        assert found.returncode == 0, found.stderr
        return json.loads(found.stdout)["pids"]


def nmtpipe(*args: str) -> list[str]:
    return [sys.executable, "-m", "nmtpipe", *args]


def start_commands(engine: str, head: netns.Host, worker: netns.Host) -> tuple[list[str], ...]:
    """The README's commands: the head's, then each worker host's."""
    return (
        ["start", engine, "--role", "head", "--address", head.address, "--workers", "2"],
        ["start", engine, "--role", "worker", "--address", worker.address, "--head", head.address],
    )


class StartFailed(Exception):
    """A host's part of the cluster did not start: local-cluster's own words."""


@contextlib.contextmanager
def namespace_cluster(engine: str, state: Path) -> Iterator[Hosts]:
    """The three hosts, S3 (an empty bucket) on the first, the cluster started on all;
    whatever happens, stopped and the hosts removed."""
    with netns.hosts(3, SUBNET) as (head, *workers):
        env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://{head.address}:{S3_PORT}",
            "NMTPIPE_PYTHON": sys.executable,
            "PYTHONUNBUFFERED": "1",
        }
        cluster = Hosts(engine, head, tuple(workers), env, state, [])
        moto = [sys.executable, "-m", "moto.server", "-H", head.address, "-p", str(S3_PORT)]
        s3 = cluster.start(head, moto, log=state / "s3.log")
        try:
            cluster.python(
                "import time, s3fs\n"
                "for _ in range(120):\n"
                "    try:\n"
                f"        s3fs.S3FileSystem().mkdir('{BUCKET}'); break\n"
                "    except Exception:\n"
                "        time.sleep(0.5)\n"
            )
            options = []
            for host in (head, *workers):
                head_args, worker_args = start_commands(engine, head, host)
                started = cluster.local_cluster(host, *(head_args if host == head else worker_args))
                if started.returncode != 0:
                    raise StartFailed(started.stderr.strip())
                options = options or started.stdout.split()
            yield Hosts(engine, head, tuple(workers), env, state, options)
        finally:
            for host in (*workers, head):
                cluster.local_cluster(host, "stop", engine)
            s3.kill()
            s3.wait()


def main() -> int:
    """Runs COMMAND on the head of a namespace cluster, with the S3 settings and
    NMTPIPE_OPTIONS (the Beam options) and NMTPIPE_WATCH (`--watch HOST=PGID` of each
    worker host's pool, for benchmarks/data/bench_clusters.py) in its environment."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("engine", choices=("flink", "spark"))
    parser.add_argument("--state", type=Path, required=True, help="local-cluster state, per host")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    args.state.mkdir(parents=True, exist_ok=True)
    with namespace_cluster(args.engine, args.state.absolute()) as cluster:
        pools = {h.namespace: cluster.pids(h)["worker-pool"] for h in cluster.workers}
        env = dict(cluster.env, NMTPIPE_OPTIONS=" ".join(cluster.options))
        env["NMTPIPE_WATCH"] = " ".join(f"--watch {h}={pgid}" for h, pgid in pools.items())
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return subprocess.run(cluster.head.command(command, env), check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
