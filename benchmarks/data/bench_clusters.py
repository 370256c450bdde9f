"""The same `nmtpipe prepare` on the FnApiRunner and on real local clusters, side by side.

Two figures per engine, each the median of `--repeat` whole commands, the engines
taking turns (this machine's speed drifts within minutes):
- the fixed cost of a submission: prepare of a tiny corpus (`--tiny` pairs), where the
  time is the command's start, the job's submission and scheduling, and its commit;
- prepare of the generated corpus (`corpora.py`: the long-tail one unless `--corpus
  recombined`, `--pairs` pairs).

Each engine is named with the Beam options that submit to it, as `scripts/local-cluster
start flink|spark` prints them (the clusters must be running):

    python benchmarks/data/bench_clusters.py --pairs 1000000 --repeat 3 \\
        --engine "flink=$(scripts/local-cluster start flink)" \\
        --engine "spark=$(scripts/local-cluster start spark)"

Every run's committed files are compared with the FnApiRunner's (sha256 in the manifests):
a figure of an engine whose output differs is not a result.

Where the Python work goes: each row also gives the CPU seconds of the submitting
command (it and its children: the FnApiRunner's workers, LOOPBACK's in-process ones)
and, with `--watch NAME=PGID` (a worker pool's process group, as `scripts/local-cluster
options ENGINE --json` lists it), of each watched group, sampled from /proc.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE), str(HERE.parents[1] / "scripts")]
import cluster_procs  # noqa: E402
import corpora  # noqa: E402

LOCAL = "fnapi"


class GroupCpu:
    """CPU seconds used by the members of some process groups and their descendants (a
    pool's forked workers run in a session of their own) while it runs: /proc read every
    0.2 s, each pid's last utime + stime kept, less what it had used before (a worker's
    last 0.2 s before it ends are missed)."""

    def __init__(self, groups: dict[str, int]) -> None:
        self.groups = groups
        self.seen: dict[int, tuple[str, float]] = {}
        self.before: dict[int, float] = {}  # what the processes already running had used
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> GroupCpu:
        self._read()
        self.before = {pid: cpu for pid, (_, cpu) in self.seen.items()}
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        self._read()

    def seconds(self) -> dict[str, float]:
        found = dict.fromkeys(self.groups, 0.0)
        for pid, (name, cpu) in self.seen.items():
            found[name] += cpu - self.before.get(pid, 0.0)
        return found

    def _sample(self) -> None:
        while not self.stop.wait(0.2):
            self._read()

    def _read(self) -> None:
        for name, pgid in self.groups.items():
            for member in cluster_procs.tree_members(pgid):
                self.seen[member.pid] = (name, member.cpu_s)


@dataclass
class Run:
    seconds: float
    submit_cpu: float  # the command and its children
    groups: dict[str, float] = field(default_factory=dict)


def prepare(corpus: str, output: str, options: list[str], watch: dict[str, int]) -> Run:
    """One whole `nmtpipe prepare` command into a fresh `output` (a folder or a URL)."""
    if "://" not in output:
        shutil.rmtree(output, ignore_errors=True)
    argv = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh", "--quiet"]
    argv += ["--trainpref", corpus, "--output", output, "--force", *options]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with GroupCpu(watch) as groups:
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Run(seconds, cpu, groups.seconds())


def committed(output: str) -> dict[str, str]:
    import fsspec  # only here: the benchmark's other parts run without it

    with fsspec.open(f"{output}/manifest.json", "rt") as f:
        doc = json.load(f)
    return {f["path"]: f["sha256"] for f in doc["files"]}


def measure(
    corpus: str, engines: dict[str, list[str]], repeat: int, work: str, watch: dict[str, int]
) -> dict[str, Run]:
    """Median run per engine (by time); the engines take turns in every round."""
    runs: dict[str, list[Run]] = {name: [] for name in engines}
    reference: dict[str, str] | None = None
    for _ in range(repeat):
        for name, options in engines.items():
            output = f"{work}/{name}"
            runs[name].append(prepare(corpus, output, options, watch))
            files = committed(output)
            reference = reference or files
            if files != reference:
                raise SystemExit(f"{name}: committed files differ from {LOCAL}'s")
    return {name: sorted(r, key=lambda run: run.seconds)[len(r) // 2] for name, r in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--tiny", type=int, default=1_000, help="pairs of the fixed-cost run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--engine", action="append", default=[], metavar="NAME=OPTIONS",
        help="an engine and the Beam options that submit to it (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--watch", action="append", default=[], metavar="NAME=PGID",
        help="a process group whose CPU each run reports: a worker pool's (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--store", metavar="URL",
        help="read the corpus from and write the outputs to URL (copied there once; "
        "s3://bucket/prefix for a cluster whose workers share no disk)",
    )  # fmt: skip
    corpora.add_option(parser)
    args = parser.parse_args()
    engines = {LOCAL: []}
    for given in args.engine:
        name, _, options = given.partition("=")
        engines[name] = shlex.split(options)
    watch = {name: int(pgid) for name, _, pgid in (w.partition("=") for w in args.watch)}
    with tempfile.TemporaryDirectory(prefix="bench-clusters-") as work:
        store = args.store or work
        rows = {}
        for what, pairs in ((f"prepare {args.tiny:,} pairs (fixed cost)", args.tiny),
                            (f"prepare {args.pairs:,} pairs", args.pairs)):  # fmt: skip
            corpus = stored(str(corpora.corpus(pairs, args.corpus)), args.store)
            rows[what] = measure(corpus, engines, args.repeat, f"{store}/{pairs}", watch)
    print("| work | " + " | ".join(engines) + " |")
    print("| --- |" + " --- |" * len(engines))
    for what, runs in rows.items():
        local = runs[LOCAL].seconds
        cells = [f"{run.seconds:.1f} s" + ("" if n == LOCAL else f" ({run.seconds / local:.2f}×)")
                 for n, run in runs.items()]  # fmt: skip
        print(f"| {what} | " + " | ".join(cells) + " |")
    print(
        "\nCPU seconds, median run: the submitting command (with its children); each watched group"
    )
    for what, runs in rows.items():
        for name, run in runs.items():
            groups = ", ".join(f"{g} {cpu:.1f}" for g, cpu in run.groups.items())
            print(
                f"- {what}, {name}: submit {run.submit_cpu:.1f}" + (f"; {groups}" if groups else "")
            )


def stored(prefix: str, store: str | None) -> str:
    """The corpus `prefix` (prefix.en, prefix.zh), copied under `store` once if given."""
    if store is None:
        return prefix
    import fsspec

    name = f"{store}/raw/{Path(prefix).name}"
    fs, _ = fsspec.core.url_to_fs(name)
    for lang in ("en", "zh"):
        if not fs.exists(f"{name}.{lang}"):
            fs.put_file(f"{prefix}.{lang}", f"{name}.{lang}")
    return name


if __name__ == "__main__":
    main()
