"""`nmtpipe prepare` side by side with the ways people do the same work today.

Each contender reads the same generated corpus (`corpora.py`: the long-tail one unless
`--corpus recombined`), normalises both sides with
SentencePiece's `nmt_nfkc`, tokenises them with Tensor2Tensor's tokenizer and counts the
tokens:

- loop: one Python process, line by line, as T2T's `generate_data` does (with nmtpipe's
  fast T2T-tokenizer implementation; `--t2t-tools` adds the same loop with T2T's own
  tokenizer code);
- hf: Hugging Face `datasets`, `load_dataset("text")` then `map(batched=True, num_proc=W)`;
- nmtpipe: `nmtpipe prepare` on the local Beam runner with W worker processes, which also
  filters, deduplicates, splits, shards and writes Parquet;
- nmtpipe-auto: the same command without runner flags: nmtpipe picks in-process or W
  worker processes by input size (`pipelines/beam/options.py`).

`--example` runs them on the bundled Tatoeba corpus (32k pairs, gzipped) instead of a
generated one: there the whole command's fixed cost is what counts.
- nmtpipe-no-langid, nmtpipe-auto-no-langid: the same with `--no-langid`, to measure
  what language identification (on by default) costs; -no-scores likewise, with
  `--scorers none`, for what the pair scorers cost.

Every contender runs in its own process, watched by psutil for wall time and peak
resident memory (per process, so that Beam's worker processes show separately).

    python benchmarks/data/bench_prepare.py --pairs 1000000 --pairs 4000000 --workers 2
    python benchmarks/data/bench_prepare.py --example --contenders loop,nmtpipe-auto,nmtpipe \
        --repeat 5
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
import corpora  # noqa: E402

EXAMPLE = HERE.parents[1] / "pipelines" / "example" / "tatoeba-cmn"  # .en.gz, .zh.gz


def spm_normalizer():
    import sentencepiece as spm

    return spm.SentencePieceNormalizer(
        rule_name="nmt_nfkc",
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=True,
    )


def run_loop(prefix: str, tokenizer: str) -> dict:
    """T2T's way: one process, one line at a time."""
    if tokenizer == "t2t":
        sys.path.insert(0, os.environ["T2T_TOOLS"])
        import t2t_vocab

        encode = t2t_vocab.T2T().tokenizer.encode
    else:
        from nmtpipe.transforms.text.t2t_tokenizer import encode
    normalize = spm_normalizer().normalize
    counts = {"src": Counter(), "tgt": Counter()}
    pairs = 0
    suffix, opener = (".gz", gzip.open) if prefix == str(EXAMPLE) else ("", open)
    with opener(f"{prefix}.en{suffix}", "rb") as en, opener(f"{prefix}.zh{suffix}", "rb") as zh:
        for src, tgt in zip(en, zh, strict=True):
            counts["src"].update(encode(normalize(src.rstrip(b"\n").decode())))
            counts["tgt"].update(encode(normalize(tgt.rstrip(b"\n").decode())))
            pairs += 1
    return {"pairs": pairs, "distinct": {k: len(v) for k, v in counts.items()}}


def _hf_batch(batch: dict) -> dict:
    from nmtpipe.transforms.text.t2t_tokenizer import encode

    normalize = spm_normalizer().normalize
    out = {}
    for side in ("src", "tgt"):
        counts: Counter[str] = Counter()
        for line in batch[side]:
            counts.update(encode(normalize(line)))
        out[f"{side}_counts"] = [json.dumps(counts)]
    return out


def run_hf(prefix: str, workers: int) -> dict:
    """Hugging Face datasets: text files to Arrow, then a batched multi-process map."""
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as cache:
        src = datasets.load_dataset("text", data_files=f"{prefix}.en", cache_dir=cache)["train"]
        tgt = datasets.load_dataset("text", data_files=f"{prefix}.zh", cache_dir=cache)["train"]
        both = datasets.concatenate_datasets(
            [src.rename_column("text", "src"), tgt.rename_column("text", "tgt")], axis=1
        )
        mapped = both.map(
            _hf_batch,
            batched=True,
            batch_size=5000,
            num_proc=workers,
            remove_columns=["src", "tgt"],
        )
        totals = {"src": Counter(), "tgt": Counter()}
        for row in mapped:
            for side in totals:
                totals[side].update(json.loads(row[f"{side}_counts"]))
        return {"pairs": len(both), "distinct": {k: len(v) for k, v in totals.items()}}


def watch(cmd: list[str]) -> dict:
    """Run `cmd`, sampling the resident memory and CPU time of it and its children every
    0.1 s; its wall time, CPU seconds (user + system, all processes: what another
    engineer's load on a shared machine does not inflate as much), peak memories and
    standard output and error."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        main = psutil.Process(proc.pid)
        peaks: dict[int, int] = {}
        cpu: dict[int, float] = {}
        while proc.poll() is None:
            for p in [main, *main.children(recursive=True)]:
                try:
                    peaks[p.pid] = max(peaks.get(p.pid, 0), p.memory_info().rss)
                    times = p.cpu_times()
                    cpu[p.pid] = max(cpu.get(p.pid, 0.0), times.user + times.system)
                except psutil.Error:
                    pass
            time.sleep(0.1)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{cmd} failed:\n{err.read().decode()[-3000:]}")
        out.seek(0)
        stdout = out.read().decode()
        err.seek(0)
        stderr = err.read().decode()
    # Beam's SDK workers, or HF's pool processes: every child of the contender.
    workers = [rss for pid, rss in peaks.items() if pid != proc.pid]
    return {
        "seconds": seconds,
        "cpu_seconds": sum(cpu.values()),
        "peak_rss_main_mb": peaks.get(proc.pid, 0) >> 20,
        "peak_rss_worker_mb": (max(workers) >> 20) if workers else None,
        "stdout": stdout,
        "stderr": stderr,
    }


# A contender's name ending in one of these: the same command with those options.
WITHOUT = {
    "-no-langid": ["--no-langid"],
    "-no-scores": ["--scorers", "none"],
    "-learn-all": ["--learn-pairs", "0"],  # the learned scorers learn from every pair
    "-learn-200k": ["--learn-pairs", "200000"],  # from a sample of about 200,000
}


def _command(name: str, prefix: str, pairs: int, workers: int) -> list[str]:
    for suffix, options in WITHOUT.items():
        if name.endswith(suffix):
            return [*_command(name.removesuffix(suffix), prefix, pairs, workers), *options]
    if not name.startswith("nmtpipe"):
        return [
            sys.executable,
            __file__,
            "--run",
            name,
            "--prefix",
            prefix,
            "--workers",
            str(workers),
        ]
    data = (
        ["--example"] if prefix == str(EXAMPLE) else ["-s", "en", "-t", "zh", "--trainpref", prefix]
    )
    runner = [] if name == "nmtpipe-auto" else [
        "--runner=FnApiRunner", f"--direct_num_workers={workers}",
        "--direct_running_mode=multi_processing",
    ]  # fmt: skip
    return [
        sys.executable, "-m", "nmtpipe", "prepare", *data,
        "--output", str(WORK / f"prepared-{Path(prefix).name}"), "--force", *runner,
    ]  # fmt: skip


def bench(
    pairs: int, workers: int, contenders: list[str], repeat: int, kind: str, example: bool = False
) -> list[dict]:
    """Round-robin over the contenders `repeat` times; report each run and the medians."""
    prefix = str(EXAMPLE) if example else str(corpora.corpus(pairs, kind))
    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    for round_ in range(repeat):
        for name in contenders:
            result = watch(_command(name, prefix, pairs, workers))
            runs[name].append(result)
            print(
                f"  round {round_ + 1} {name:>9} {pairs:>9,} pairs {result['seconds']:7.1f} s, "
                f"{result['cpu_seconds']:7.1f} CPU s, "
                f"peak RSS main {result['peak_rss_main_mb']} MB"
                + (
                    f", worker {result['peak_rss_worker_mb']} MB"
                    if result["peak_rss_worker_mb"]
                    else ""
                ),
                flush=True,
            )
    rows = []
    for name, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        rows.append(
            {
                "contender": name,
                "pairs": pairs,
                "seconds_median": round(seconds, 2),
                "seconds_all": [round(r["seconds"], 2) for r in results],
                "cpu_seconds_median": round(
                    statistics.median(r["cpu_seconds"] for r in results), 1
                ),
                "pairs_per_s": round(pairs / seconds),
                "peak_rss_main_mb": max(r["peak_rss_main_mb"] for r in results),
                "peak_rss_worker_mb": max((r["peak_rss_worker_mb"] or 0) for r in results) or None,
            }
        )
    base = next((r["seconds_median"] for r in rows if r["contender"] == "loop"), None)
    print(
        "| contender | pairs | median s | runs (s) | median CPU s | pairs/s | vs loop "
        "| peak RSS main / worker |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ratio = f"{base / r['seconds_median']:.2f}x" if base else "-"
        worker = f" / {r['peak_rss_worker_mb']} MB" if r["peak_rss_worker_mb"] else ""
        print(
            f"| {r['contender']} | {pairs:,} | {r['seconds_median']} | "
            f"{', '.join(map(str, r['seconds_all']))} | {r['cpu_seconds_median']} | "
            f"{r['pairs_per_s']:,} | {ratio} | "
            f"{r['peak_rss_main_mb']} MB{worker} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, action="append", help="corpus sizes (repeatable)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; medians are reported")
    parser.add_argument(
        "--contenders",
        default="loop,hf,nmtpipe",
        help="comma-separated: loop,t2t-loop,hf,nmtpipe,nmtpipe-auto and the last two "
        "with -no-langid or -no-scores (without the pair scorers)",
    )
    parser.add_argument(
        "--example", action="store_true", help="the bundled Tatoeba corpus, not a generated one"
    )
    parser.add_argument("--t2t-tools", help="shared/tools folder, for the t2t-loop contender")
    corpora.add_option(parser)
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:  # a contender, in its own process
        if args.run == "hf":
            print(json.dumps(run_hf(args.prefix, args.workers)))
        else:
            print(json.dumps(run_loop(args.prefix, "t2t" if args.run == "t2t-loop" else "nmtpipe")))
        return
    if args.t2t_tools:
        os.environ["T2T_TOOLS"] = args.t2t_tools
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{args.corpus} corpus")  # fmt: skip
    rows = []
    if args.example:
        rows += bench(
            32_028, args.workers, args.contenders.split(","), args.repeat, args.corpus, example=True
        )
    for pairs in args.pairs or ([] if args.example else [1_000_000]):
        rows += bench(pairs, args.workers, args.contenders.split(","), args.repeat, args.corpus)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
