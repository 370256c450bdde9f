"""`nmtpipe encode` against the tokenizer alone, and our readers against fairseq's.

Encoding: the generated corpus of `--pairs` pairs (`corpora.py`: the long-tail one
unless `--corpus recombined`) is prepared and given a joined SentencePiece vocabulary
(both cached in `benchmarks/.work`); then

- spm: one process reads every prepared shard and calls SentencePiece's batch
  `encode(lines, num_threads=1)` on both sides — only the encode calls are timed. Twice
  its throughput is the ideal for two workers;
- spm-2proc: SentencePiece's own batch encode as a user runs it on two cores, whole
  processes timed: two processes (Python's start and imports included) each read every
  other Parquet row group, encode both sides and write the ids and each sentence's
  length as int32 binary (one `np.fromiter` per batch, as nmtpipe flattens them);
- nmtpipe: the whole `nmtpipe encode` command with its default local runner (for a
  SentencePiece vocabulary, one worker process per two cores with two encoding threads
  each: in-process on two cores), both formats; wall time including Python's start,
  Beam's import, writing Arrow and fairseq shards.

`--model t2t` encodes with a Tensor2Tensor vocabulary of 32,000 per language instead
(`nmtpipe vocab` with its defaults): only `nmtpipe encode` is timed, with the peak
memory of its processes (the peers encode with SentencePiece).

Reading: the train split of that output, through `open_dataset` (fairseq `.bin/.idx`
and Arrow) and through fairseq's own `MMapIndexedDataset` (from a git mirror via
`shared/tools/fairseq_mmap.py`; set MIRROR_ROOT as its README says) over the same files,
concatenated across shards with a bisect as fairseq's `ConcatDataset` does. Random
access reads `--random` pairs at seeded random positions, sequential reads every pair;
tokens/s counts both sides. fairseq returns int64 torch tensors; ours returns views in
the stored dtype, and is also timed turned into int64 tensors like fairseq's.

    MIRROR_ROOT=/work/.mirror python benchmarks/data/bench_encode.py --pairs 1000000 \\
        --fairseq-tools ../shared/tools
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
sys.path.insert(0, str(HERE.parents[1]))  # the repository
import corpora  # noqa: E402

_SPM_ALONE = """
import json, sys, time
import pyarrow.parquet as pq
import sentencepiece as spm
from nmtpipe.transforms.storage import manifest
root, model, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
sp = spm.SentencePieceProcessor(model_file=model)
doc = manifest.read_manifest(root, "nmtpipe.prepare")
seconds = pairs = tokens = 0
for info in doc["splits"].values():
    for path in info["files"]:
        for b in pq.ParquetFile(f"{root}/{path}").iter_batches(batch, columns=["src", "tgt"]):
            src, tgt = b.column("src").to_pylist(), b.column("tgt").to_pylist()
            start = time.perf_counter()
            ids = sp.encode(src, num_threads=1) + sp.encode(tgt, num_threads=1)
            seconds += time.perf_counter() - start
            pairs += len(src)
            tokens += sum(map(len, ids))
print(json.dumps({"seconds": seconds, "pairs": pairs, "tokens": tokens}))
"""

_SPM_WORKER = """
import itertools, sys
import numpy as np
import pyarrow.parquet as pq
import sentencepiece as spm
from nmtpipe.transforms.storage import manifest
root, model, batch, rank, ranks, out = sys.argv[1:7]
sp = spm.SentencePieceProcessor(model_file=model)
doc = manifest.read_manifest(root, "nmtpipe.prepare")
groups = [(path, g) for info in doc["splits"].values() for path in info["files"]
          for g in range(pq.ParquetFile(f"{root}/{path}").num_row_groups)]
with open(out, "wb") as f:
    for path, g in groups[int(rank)::int(ranks)]:
        table = pq.ParquetFile(f"{root}/{path}").read_row_group(g, columns=["src", "tgt"])
        for b in table.to_batches(int(batch)):
            for side in ("src", "tgt"):
                ids = sp.encode(b.column(side).to_pylist(), num_threads=1)
                np.fromiter(map(len, ids), np.int32, len(ids)).tofile(f)
                np.fromiter(itertools.chain.from_iterable(ids), np.int32).tofile(f)
"""

_SPM_TWO = """
import subprocess, sys
root, model, batch, out, worker = sys.argv[1:6]
procs = [subprocess.Popen([sys.executable, "-c", worker, root, model, batch, str(r), "2",
                           f"{out}.{r}"]) for r in range(2)]
sys.exit(max(p.wait() for p in procs))
"""


def nmtpipe(*args: str) -> list[str]:
    return [sys.executable, "-m", "nmtpipe", *args]


def vocabulary(root: Path, size: int, model: str) -> Path:
    out = WORK / f"vocab-{model}-{size}-{root.name}"
    kind = ["--model", "t2t"] if model == "t2t" else ["--model", "unigram", "--joined"]
    cmd = nmtpipe("vocab", "--prepared", str(root), *kind, "--vocab-size", str(size),
                  "--output", str(out))  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def bench_nmtpipe(root: Path, vocab: Path, batch: int, repeat: int) -> list[dict]:
    """`nmtpipe encode` as a user runs it, watched: wall time and peak memory."""
    from bench_prepare import watch

    out = WORK / f"encoded-{vocab.name}"
    runs = []
    for _ in range(repeat):
        cmd = nmtpipe("encode", "--prepared", str(root), "--vocab", str(vocab), "--output",
                      str(out), "--batch-size", str(batch), "--force")  # fmt: skip
        runs.append(watch(cmd))
        runs[-1].pop("stdout")
        runs[-1]["output"] = str(out)
    return runs


def bench_encoding(root: Path, vocab: Path, batch: int, repeat: int) -> dict:
    from bench_prepare import watch

    alone = []
    for _ in range(repeat):
        cmd = [sys.executable, "-c", _SPM_ALONE, str(root), str(vocab / "spm.model"), str(batch)]
        proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
        alone.append(json.loads(proc.stdout))
    two = []
    for _ in range(repeat):
        cmd = [sys.executable, "-c", _SPM_TWO, str(root), str(vocab / "spm.model"), str(batch),
               str(WORK / f"spm-ids-{root.name}"), _SPM_WORKER]  # fmt: skip
        two.append(watch(cmd)["seconds"])
    runs = bench_nmtpipe(root, vocab, batch, repeat)
    pairs = alone[0]["pairs"]
    spm_seconds = min(a["seconds"] for a in alone)
    nmt_seconds = min(r["seconds"] for r in runs)
    ideal = 2 * pairs / spm_seconds
    return {
        "pairs": pairs,
        "tokens": alone[0]["tokens"],
        "spm_alone_seconds": [round(a["seconds"], 2) for a in alone],
        "spm_alone_pairs_per_s": round(pairs / spm_seconds),
        "spm_two_processes_seconds": [round(t, 2) for t in two],
        "nmtpipe_seconds": [round(r["seconds"], 2) for r in runs],
        "nmtpipe_peak_rss_mb": {
            "driver": max(r["peak_rss_main_mb"] for r in runs),
            "worker": max(r["peak_rss_worker_mb"] or 0 for r in runs),
        },
        "nmtpipe_pairs_per_s": round(pairs / nmt_seconds),
        "ratio_to_2x_spm": round(pairs / nmt_seconds / ideal, 3),
        "ratio_to_spm_two_processes": round(min(two) / nmt_seconds, 3),
        "output": runs[0]["output"],
    }


class FairseqPairs:
    """fairseq's MMapIndexedDataset per shard and language, concatenated with a bisect
    (what fairseq's ConcatDataset + LanguagePairDataset do to fetch a pair)."""

    def __init__(self, out: Path, doc: dict, tools: Path) -> None:
        sys.path.insert(0, str(tools))
        from fairseq_mmap import Fairseq

        mmap = Fairseq().indexed_dataset.MMapIndexedDataset
        langs = doc["languages"]
        self.shards = [
            (mmap(str(out / f"{p}.{langs['src']}")), mmap(str(out / f"{p}.{langs['tgt']}")))
            for p in doc["splits"]["train"]["fairseq"]
        ]
        self.ends = list(np.cumsum([len(s) for s, _ in self.shards]))

    def __len__(self) -> int:
        return int(self.ends[-1])

    def __getitem__(self, i: int):
        k = bisect.bisect_right(self.ends, i)
        j = i - (self.ends[k - 1] if k else 0)
        src, tgt = self.shards[k]
        return src[j], tgt[j]


def _as_tensors(split):
    import torch

    class Tensors:
        def __len__(self) -> int:
            return len(split)

        def __getitem__(self, i: int):
            src, tgt = split[i]
            return torch.from_numpy(src.astype(np.int64)), torch.from_numpy(tgt.astype(np.int64))

    return Tensors()


def read_speed(data, order: np.ndarray) -> dict:
    start = time.perf_counter()
    tokens = 0
    for i in order:
        src, tgt = data[int(i)]
        tokens += len(src) + len(tgt)
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 3), "tokens": tokens, "tokens_per_s": round(tokens / seconds)}


def bench_reading(out: Path, tools: Path, random_reads: int) -> dict:
    from nmtpipe.transforms.formats.encoded_dataset import open_dataset

    fairseq_ds = open_dataset(str(out), "fairseq", verify="size")
    arrow_ds = open_dataset(str(out), "arrow", verify="size")
    contenders = {
        "fairseq MMapIndexedDataset": FairseqPairs(out, fairseq_ds.manifest, tools),
        "nmtpipe fairseq reader": fairseq_ds["train"],
        "nmtpipe fairseq reader, int64 tensors": _as_tensors(fairseq_ds["train"]),
        "nmtpipe arrow reader": arrow_ds["train"],
        "nmtpipe arrow reader, int64 tensors": _as_tensors(arrow_ds["train"]),
    }
    n = len(fairseq_ds["train"])
    orders = {
        "random": np.random.default_rng(0).integers(0, n, random_reads),
        "sequential": np.arange(n),
    }
    results = {}
    for name, data in contenders.items():
        assert len(data) == n
        results[name] = {kind: read_speed(data, order) for kind, order in orders.items()}
    return {"pairs": n, "random_reads": random_reads, "readers": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--vocab", help="a committed vocab output to use instead of training one")
    parser.add_argument("--model", choices=("unigram", "t2t"), default="unigram")
    corpora.add_option(parser)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--random", type=int, default=200_000, help="random reads")
    parser.add_argument("--fairseq-tools", default=str(HERE.parents[2] / "shared" / "tools"))
    parser.add_argument(
        "--no-reading", action="store_true", help="time encoding only (no fairseq mirror needed)"
    )
    args = parser.parse_args()
    os.chdir(HERE.parents[1])
    root = corpora.prepared(args.pairs, args.corpus)
    size = 32000 if args.model == "t2t" else args.vocab_size
    vocab = Path(args.vocab) if args.vocab else vocabulary(root, size, args.model)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "corpus": args.corpus,
    }
    if args.model == "t2t":
        runs = bench_nmtpipe(root, vocab, args.batch_size, args.repeat)
        result["encoding"] = {
            "nmtpipe_seconds": [round(r["seconds"], 2) for r in runs],
            "cpu_seconds": [round(r["cpu_seconds"], 1) for r in runs],
            "peak_rss_mb": {"driver": max(r["peak_rss_main_mb"] for r in runs),
                            "worker": max(r["peak_rss_worker_mb"] or 0 for r in runs)},
            "output": runs[0]["output"],
        }  # fmt: skip
    else:
        result["encoding"] = bench_encoding(root, vocab, args.batch_size, args.repeat)
    if not args.no_reading:
        result["reading"] = bench_reading(
            Path(result["encoding"]["output"]), Path(args.fairseq_tools), args.random
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
