"""prepare → vocab → encode on one generated corpus, each step's whole command watched:
wall time, CPU seconds and the peak resident memory of its driver and of its largest
worker process, as a user would run them (default local runner, default options,
a Tensor2Tensor vocabulary of 32,000 per language).

Run it at growing sizes to see what grows with the corpus: nothing should but time.

    python benchmarks/data/bench_chain.py --pairs 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
import corpora  # noqa: E402
from bench_prepare import watch  # noqa: E402


def steps(prefix: Path, out: Path) -> dict[str, list[str]]:
    nmtpipe = [sys.executable, "-m", "nmtpipe"]
    prepared, vocab = out / "prepared", out / "vocab"
    return {
        "prepare": [*nmtpipe, "prepare", "-s", "en", "-t", "zh", "--trainpref", str(prefix),
                    "--output", str(prepared), "--force"],
        "vocab": [*nmtpipe, "vocab", "--prepared", str(prepared), "--model", "t2t",
                  "--vocab-size", "32000", "--output", str(vocab), "--force"],
        "encode": [*nmtpipe, "encode", "--prepared", str(prepared), "--vocab", str(vocab),
                   "--output", str(out / "encoded"), "--force"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, action="append", help="corpus sizes (repeatable)")
    corpora.add_option(parser)
    parser.add_argument("--json", help="write all results here")
    args = parser.parse_args()
    machine = f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"{machine}, {args.corpus} corpus", flush=True)
    rows = []
    for pairs in args.pairs or [1_000_000]:
        prefix = corpora.corpus(pairs, args.corpus)
        for step, cmd in steps(prefix, WORK / f"chain-{args.corpus}-{pairs}").items():
            result = watch(cmd)
            result.pop("stdout")
            rows.append({"pairs": pairs, "step": step, **result})
            print(f"  {pairs:>11,} {step:>8} {result['seconds']:8.1f} s, "
                  f"{result['cpu_seconds']:8.1f} CPU s, driver {result['peak_rss_main_mb']} MB"
                  + (f", worker {result['peak_rss_worker_mb']} MB"
                     if result["peak_rss_worker_mb"] else ""), flush=True)  # fmt: skip
    print("| pairs | step | wall s | CPU s | peak RSS driver | peak RSS largest worker |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        worker = f"{r['peak_rss_worker_mb']} MB" if r["peak_rss_worker_mb"] else "-"
        print(f"| {r['pairs']:,} | {r['step']} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
              f"{r['peak_rss_main_mb']} MB | {worker} |")  # fmt: skip
    if args.json:
        result = {"date": time.strftime("%Y-%m-%d"), "machine": machine, "rows": rows}
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
