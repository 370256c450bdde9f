"""The same `nmtpipe prepare` on the FnApiRunner and on real local clusters, side by side.

Two figures per engine, each the median of `--repeat` whole commands, the engines
taking turns (this machine's speed drifts within minutes):
- the fixed cost of a submission: prepare of a tiny corpus (`--tiny` pairs), where the
  time is the command's start, the job's submission and scheduling, and its commit;
- prepare of the generated corpus (`corpora.py`: the long-tail one unless `--corpus
  recombined`, `--pairs` pairs).

Each engine is named with the Beam options that submit to it, as `scripts/local-cluster
start flink|spark` prints them (the clusters must be running):

    python benchmarks/bench_clusters.py --pairs 1000000 --repeat 3 \\
        --engine "flink=$(scripts/local-cluster start flink)" \\
        --engine "spark=$(scripts/local-cluster start spark)"

Every run's committed files are compared with the FnApiRunner's (sha256 in the manifests):
a figure of an engine whose output differs is not a result.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpora  # noqa: E402

LOCAL = "fnapi"


def prepare(corpus: str, output: Path, options: list[str]) -> float:
    """Seconds of one whole `nmtpipe prepare` command into a fresh `output`."""
    shutil.rmtree(output, ignore_errors=True)
    argv = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh", "--quiet"]
    argv += ["--trainpref", corpus, "--output", str(output), *options]
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return time.perf_counter() - started


def committed(output: Path) -> dict[str, str]:
    doc = json.loads((output / "manifest.json").read_text())
    return {f["path"]: f["sha256"] for f in doc["files"]}


def measure(corpus: str, engines: dict[str, list[str]], repeat: int, work: Path) -> dict:
    """Median seconds per engine; the engines take turns in every round."""
    times: dict[str, list[float]] = {name: [] for name in engines}
    reference: dict[str, str] | None = None
    for _ in range(repeat):
        for name, options in engines.items():
            output = work / name
            times[name].append(prepare(corpus, output, options))
            files = committed(output)
            reference = reference or files
            if files != reference:
                raise SystemExit(f"{name}: committed files differ from {LOCAL}'s")
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--tiny", type=int, default=1_000, help="pairs of the fixed-cost run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--engine", action="append", default=[], metavar="NAME=OPTIONS",
        help="an engine and the Beam options that submit to it (repeatable)",
    )  # fmt: skip
    corpora.add_option(parser)
    args = parser.parse_args()
    engines = {LOCAL: []}
    for given in args.engine:
        name, _, options = given.partition("=")
        engines[name] = shlex.split(options)
    with tempfile.TemporaryDirectory(prefix="bench-clusters-") as work:
        rows = {
            f"prepare {args.tiny:,} pairs (fixed cost)": measure(
                str(corpora.corpus(args.tiny, args.corpus)), engines, args.repeat, Path(work)
            ),
            f"prepare {args.pairs:,} pairs": measure(
                str(corpora.corpus(args.pairs, args.corpus)), engines, args.repeat, Path(work)
            ),
        }
    print("| work | " + " | ".join(engines) + " |")
    print("| --- |" + " --- |" * len(engines))
    for what, seconds in rows.items():
        cells = [f"{seconds[LOCAL]:.1f} s"]
        cells += [
            f"{seconds[n]:.1f} s ({seconds[n] / seconds[LOCAL]:.2f}×)"
            for n in engines
            if n != LOCAL
        ]
        print(f"| {what} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
