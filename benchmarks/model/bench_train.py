"""`nmtpipe train` throughput: one process against two-process DDP, and the data share.

Runs `nmtpipe train` on an encoded dataset (default: the README demo's
`runs/example/encoded`; build it with the README's first command) for `--updates`
updates, once in one process and once with `--nproc 2` (torchrun, gloo on CPU, NCCL on
GPU), each into a fresh checkpoint folder, and reports from the runs' own summaries:
target tokens/s (over the whole run, validation and checkpoint saves included), the
share of time spent fetching and collating batches, and the wall time of the command.

    python benchmarks/model/bench_train.py --data runs/example/encoded --updates 100
    # on a GPU machine (the anchors: fairseq / NVIDIA's transformer-big AMP tables):
    python benchmarks/model/bench_train.py --data runs/encoded --arch transformer_big \\
        --max-tokens 8192 --updates 300 --nproc 1 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time


def run(args: argparse.Namespace, nproc: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="nmtpipe-bench-train-") as save_dir:
        cmd = [sys.executable, "-m", "nmtpipe", "train", "--data", args.data,
               "--save-dir", save_dir, "--arch", args.arch, "--max-tokens", str(args.max_tokens),
               "--max-update", str(args.updates), "--warmup-updates", "50",
               "--log-interval", str(args.updates), "--nproc", str(nproc)]  # fmt: skip
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
    summary = json.loads(proc.stdout)["result"]
    return {
        "nproc": nproc,
        "wall_seconds": round(wall, 1),
        "train_seconds": summary["seconds"],
        "target_tokens_per_s": summary["target_tokens_per_s"],
        "data_share": summary["data_share"],
        "valid_loss": round(summary["valid_loss"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="runs/example/encoded")
    parser.add_argument("--arch", default="transformer_tiny")
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--nproc", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    results = [run(args, n) for n in args.nproc]
    print(json.dumps({
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "arch": args.arch, "max_tokens": args.max_tokens, "updates": args.updates,
        "runs": results,
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
