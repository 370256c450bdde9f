"""Other thresholds on a prepared corpus: `nmtpipe rethreshold` from the prepared
dataset, side by side with `nmtpipe prepare` of the raw corpus with those thresholds
(what a user ran before it existed), and a check that both commit the same files.

The long-tail corpus (`corpora.py`) is prepared once with the defaults; then, in turn
`--repeat` times, each contender writes its own output, watched as `bench_prepare.py`
watches (wall time, CPU seconds and peak memory of the whole process tree).

    python benchmarks/data/bench_rethreshold.py --pairs 1000000 --workers 2 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
import corpora  # noqa: E402
from bench_prepare import watch  # noqa: E402

THRESHOLDS = ["--lexical-min", "0.5", "--length-max-deviation", "3"]


def _runner(workers: int) -> list[str]:
    return [
        "--runner=FnApiRunner",
        f"--direct_num_workers={workers}",
        "--direct_running_mode=multi_processing",
    ]


def _prepare(prefix: Path, output: Path, workers: int, extra: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh",
        "--trainpref", str(prefix), "--output", str(output), "--force", *extra, *_runner(workers),
    ]  # fmt: skip


def _data_files(output: Path) -> dict[str, str]:
    doc = json.loads((output / "manifest.json").read_text())
    return {f["path"]: f["sha256"] for f in doc["files"] if f["kind"] not in ("card",)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    prefix = corpora.corpus(args.pairs)
    work = corpora.WORK / f"rethreshold-{args.pairs}"
    source = work / "source"
    if not (source / "manifest.json").exists():
        watch(_prepare(prefix, source, args.workers, []))
    again = [sys.executable, "-m", "nmtpipe", "rethreshold", str(source)]
    again += ["--output", str(work / "rethreshold"), "--force", *THRESHOLDS]
    commands = {
        "rethreshold": [*again, *_runner(args.workers)],
        "prepare": _prepare(prefix, work / "prepare", args.workers, THRESHOLDS),
    }
    runs: dict[str, list[dict]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, cmd in commands.items():
            found = watch(cmd)
            found.pop("stdout"), found.pop("stderr")
            runs[name].append(found)
            print(name, json.dumps(found), flush=True)
    same = _data_files(work / "rethreshold") == _data_files(work / "prepare")
    print(f"cpu: {platform.processor() or platform.machine()}; pairs {args.pairs:,}")
    for name, found in runs.items():
        cells = {
            key: statistics.median(r[key] for r in found)
            for key in ("seconds", "cpu_seconds", "peak_rss_main_mb", "peak_rss_worker_mb")
        }
        print(name, json.dumps(cells))
    print("the same files:", same)


if __name__ == "__main__":
    main()
