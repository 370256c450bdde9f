"""An incremental `nmtpipe refresh` against a full rebuild, on a corpus of many files.

The corpus is `--files` generated input files (`corpora.py`: the long-tail generator
unless `--corpus recombined`, seeds 0..files-1) of `--pairs` pairs in all; a refresh
adds one new file of `--new-percent` of the corpus (new seeds), like a crawl that lands
a new batch. With the same Beam options and the
same config (a joined T2T vocabulary, Arrow and fairseq shards):

- full: `nmtpipe run CONFIG --until encode` on a fresh root with every file, new
  one included: prepare, vocab and encode of the whole corpus;
- refresh: `nmtpipe refresh CONFIG` on a root that already has a version of the corpus
  without the new file (built by an untimed first refresh); then the new file lands and
  the refresh is timed. Repeated with a further new file each time.

Each command runs as a process of its own and is timed from the outside (wall time,
Python start-up and imports included).

    python benchmarks/data/bench_refresh.py --pairs 1000000 --files 10 --new-percent 1 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]

import corpora  # noqa: E402
from bench_prepare import watch  # noqa: E402

BEAM = ["--runner=FnApiRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def write_config(path: Path, root: Path, raw: Path) -> Path:
    doc = {
        "root": str(root),
        "beam": BEAM,
        "prepare": {"src_lang": "en", "tgt_lang": "zh", "trainpref": [str(raw / "*")]},
        "vocab": {"vocab_size": 8192, "joined": True},
        "encode": {"formats": ["arrow", "fairseq"]},
        "refresh": {"keep_versions": 0},
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def timed(*args: str) -> dict:
    """One nmtpipe command, watched (bench_prepare.watch): seconds, peak memory, its log."""
    return watch([sys.executable, "-m", "nmtpipe", *args])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--new-percent", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    corpora.add_option(parser)
    args = parser.parse_args()
    base = WORK / f"refresh-{args.corpus}-{args.pairs}"
    shutil.rmtree(base, ignore_errors=True)
    raw, new = base / "raw", base / "new"
    raw.mkdir(parents=True)
    for k in range(args.files):
        corpora.generate(args.corpus, args.pairs // args.files, str(raw / f"base-{k:03d}"), k)
    new_pairs = int(args.pairs * args.new_percent / 100)
    for k in range(args.repeat):
        corpora.generate(args.corpus, new_pairs, str(new / f"new-{k:03d}"), 10_000 + k)

    inc_config = write_config(base / "refresh.yaml", base / "refresh-root", raw)
    first = timed("refresh", str(inc_config))["seconds"]
    print(f"first refresh ({args.pairs:,} pairs in {args.files} files): {first:.1f} s", flush=True)

    full_runs, refresh_runs = [], []
    for k in range(args.repeat):
        for lang in ("en", "zh"):
            shutil.copy(new / f"new-{k:03d}.{lang}", raw / f"new-{k:03d}.{lang}")
        refreshed = timed("refresh", str(inc_config))
        refresh_runs.append(refreshed)
        seconds = refreshed["seconds"]
        full_root = base / "full-root"
        shutil.rmtree(full_root, ignore_errors=True)
        full_config = write_config(base / "full.yaml", full_root, raw)
        rebuilt = timed("run", str(full_config), "--until", "encode")
        full_runs.append(rebuilt)
        print(f"round {k + 1}: refresh {seconds:.1f} s, full rebuild {rebuilt['seconds']:.1f} s; "
              f"peak RSS driver {refreshed['peak_rss_main_mb']} MB, worker "
              f"{refreshed['peak_rss_worker_mb']} MB", flush=True)  # fmt: skip
        print(refreshed["stderr"], flush=True)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "corpus": args.corpus,
        "pairs": args.pairs,
        "files": args.files,
        "new_pairs": new_pairs,
        "first_refresh_s": round(first, 2),
        "refresh_s": [round(r["seconds"], 2) for r in refresh_runs],
        "full_s": [round(r["seconds"], 2) for r in full_runs],
        "refresh_peak_rss_mb": {
            "driver": max(r["peak_rss_main_mb"] for r in refresh_runs),
            "worker": max(r["peak_rss_worker_mb"] or 0 for r in refresh_runs),
        },
        "ratio": round(
            statistics.median(r["seconds"] for r in refresh_runs)
            / statistics.median(r["seconds"] for r in full_runs),
            4,
        ),
    }
    print(json.dumps(result, indent=2))
    (WORK / f"bench-refresh-{args.corpus}-{args.pairs}.json").write_text(
        json.dumps(result, indent=2)
    )


if __name__ == "__main__":
    main()
