"""What checking committed files costs: each verified read beside the same read unchecked.

On one prepared output of the generated long-tail corpus (`corpora.py`, `--pairs` pairs, one
shard) and its encoding (a joined T2T vocabulary), each contender runs round-robin
`--repeat` times in this process, files in the page cache (the check's CPU cost, not
the disk's):

- prepared shard, whole: `pyarrow.parquet.read_table` vs `manifest.read_parquet_entry`
  (sha256 while the bytes arrive, page CRCs on parse);
- prepared shard, by row group (what an encode task of a part does): each row group read
  without and with page CRC verification;
- token counts: reading every count file unchecked vs `counts.read_counts` (sha256);
- encoded data: `open_dataset(verify="size")` vs `verify="sha256"` (what train and decode
  pay once per file and machine), fairseq and Arrow;
- a checkpoint (transformer_base's 60M parameters, random): its bytes read and
  `torch.load`ed as before (`weights_only=True`) vs `checkpoint.load` (the same, plus the
  sha256 of the bytes against the digest they carry).

    python benchmarks/data/bench_integrity.py --pairs 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]

import corpora  # noqa: E402


def _data(pairs: int) -> tuple[Path, Path, Path]:
    """The corpus, prepared in one shard, a vocabulary and the encoding (cached)."""
    from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
    from nmtpipe.pipelines.workflow.prepare import run_prepare
    from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
    from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab

    folder = WORK / f"integrity-{pairs}"
    corpus = corpora.corpus(pairs)
    prepared, vocab, encoded = folder / "prepared", folder / "vocab", folder / "encoded"
    beam = ["--runner=FnApiRunner", "--direct_num_workers=2"]
    config = PrepareConfig("en", "zh", str(prepared), trainpref=(str(corpus),), num_shards=1)
    run_prepare(config, beam)
    run_vocab(VocabConfig(str(prepared), str(vocab), vocab_size=8000, joined=True), beam)
    run_encode(EncodeConfig(str(prepared), str(vocab), str(encoded)), beam)
    return prepared, vocab, encoded


def _time(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import torch

    from nmtpipe.trainers.model.config import preset
    from nmtpipe.trainers.model.transformer import Transformer
    from nmtpipe.trainers.runtime import checkpoint
    from nmtpipe.transforms.formats.encoded_dataset import open_dataset
    from nmtpipe.transforms.storage import fsio, manifest
    from nmtpipe.transforms.vocab import counts

    prepared, _, encoded = _data(args.pairs)
    root = str(prepared)
    doc = manifest.read_manifest(root, "nmtpipe.prepare")
    entries = {f["path"]: f for f in doc["files"]}
    shard = entries[doc["splits"]["train"]["files"][0]]
    shard_url = manifest.file_url(root, shard)
    groups = len(fsio.parquet_row_groups(shard_url))
    count_files, _ = counts.count_files(root, doc, "joined")
    ckpt = str(WORK / "integrity-checkpoint.pt")
    model = Transformer(preset("transformer_base", src_vocab=32000, tgt_vocab=32000, pad=0))
    checkpoint.save(ckpt, {"model": model.state_dict()})

    def unchecked_counts() -> dict[str, int]:  # the same dict, read without the sha256
        found: dict[str, int] = {}
        for c in count_files:
            table = pq.read_table(manifest.file_url(c.root, c.entry))
            tokens, numbers = table["token"].to_pylist(), table["count"].to_pylist()
            found.update(zip(tokens, numbers, strict=True))
        return found

    def by_group(verify: bool) -> None:
        parquet = pq.ParquetFile(shard_url, page_checksum_verification=verify)
        for g in range(groups):
            parquet.read_row_group(g, columns=["id", "src", "tgt"])

    pairs = {
        "prepared shard, whole": (
            lambda: pq.read_table(shard_url),
            lambda: manifest.read_parquet_entry(root, shard),
        ),
        "prepared shard, by row group": (lambda: by_group(False), lambda: by_group(True)),
        "token counts": (unchecked_counts, lambda: counts.read_counts(count_files)),
        "encoded open, fairseq": (
            lambda: open_dataset(str(encoded), "fairseq", verify="size"),
            lambda: open_dataset(str(encoded), "fairseq", verify="sha256"),
        ),
        "encoded open, arrow": (
            lambda: open_dataset(str(encoded), "arrow", verify="size"),
            lambda: open_dataset(str(encoded), "arrow", verify="sha256"),
        ),
        "checkpoint load": (
            lambda: torch.load(
                io.BytesIO(fsio.read_bytes(ckpt)), map_location="cpu", weights_only=True
            ),
            lambda: checkpoint.load(ckpt),
        ),
    }
    sizes = {
        "prepared shard, whole": shard["size"],
        "prepared shard, by row group": shard["size"],
        "token counts": sum(c.entry["size"] for c in count_files),
        "encoded open, fairseq": sum(
            f["size"] for f in json.loads((encoded / "manifest.json").read_text())["files"]
            if f["kind"].startswith("fairseq")
        ),
        "encoded open, arrow": sum(
            f["size"] for f in json.loads((encoded / "manifest.json").read_text())["files"]
            if f["kind"] == "arrow"
        ),
        "checkpoint load": Path(ckpt).stat().st_size,
    }  # fmt: skip
    for plain, checked in pairs.values():  # warm the page cache and the imports
        plain(), checked()
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in pairs}
    for _ in range(args.repeat):
        for name, (plain, checked) in pairs.items():
            times[name][0].append(_time(plain))
            times[name][1].append(_time(checked))
    machine = platform.processor() or platform.machine()
    print(f"# {machine}, python {platform.python_version()}, {args.pairs:,} pairs, {groups} groups")
    print("| read | MB | unchecked s | checked s | extra |")
    print("| --- | --- | --- | --- | --- |")
    for name, (plain, checked) in times.items():
        a, b = statistics.median(plain), statistics.median(checked)
        extra = f"{100 * (b / a - 1):+.0f}%"
        print(f"| {name} | {sizes[name] / 1e6:.1f} | {a:.3f} | {b:.3f} | {extra} |")


if __name__ == "__main__":
    main()
