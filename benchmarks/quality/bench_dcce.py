"""What the model score (dual conditional cross-entropy, `nmtpipe score`) adds on the
noisy corpus of `bench_pair_quality.py`, kind by kind.

Seed models: the demo's recipe (`nmtpipe run --example`'s workflow), en→zh and zh→en,
each trained on the Tatoeba pairs the noisy corpus does not use (no source or target of
it on either side). The noisy corpus is prepared with the default scorers, and with
`--scorers none` (the filters alone), each in --nproc train shards; `nmtpipe score`
scores each with both models on --nproc ranks, and the DCCE threshold is the highest
at which --clean-kept of the corpus's clean pairs are still kept. Reported per kind:
the share kept by the default scorers, by the filters and DCCE, and by both; the
median cross-entropies of each kind; and scoring's CPU-seconds per pair (the whole
process tree of `nmtpipe score`). A re-run keeps the seed models and their data.

    python benchmarks/quality/bench_dcce.py --out /tmp/dcce
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE)]
from bench_pair_quality import nmtpipe_kept, shares, timed  # noqa: E402
from make_pair_noise import DATA, KINDS, mixed, unused_tatoeba, write  # noqa: E402

DIRECTIONS = {"forward": ("en", "zh"), "backward": ("zh", "en")}


def seed_config(folder: Path, direction: str, max_update: int) -> Path:
    """The demo's workflow, training only, on the seed corpus in `direction`."""
    src, tgt = DIRECTIONS[direction]
    bundled_yaml = resources.files("nmtpipe.pipelines") / "example" / "example.yaml"
    doc = yaml.safe_load(bundled_yaml.read_text(encoding="utf-8"))
    root = folder / direction
    doc["root"] = str(root)
    prepare = {k: v for k, v in doc["prepare"].items() if k not in ("example", "zh_script")}
    prepare.update(src_lang=src, tgt_lang=tgt, trainpref=[str(folder / "seed")])
    doc["prepare"] = prepare
    doc["train"]["max_update"] = max_update
    doc.pop("evaluate", None)
    path = root.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def train_seed(folder: Path, direction: str, max_update: int) -> Path:
    """Train the seed model of `direction` (a trained one is kept: preparing its data
    again would build another vocabulary); its checkpoint folder."""
    save_dir = folder / direction / "checkpoints"
    if (save_dir / "checkpoint_best.pt").exists():
        return save_dir
    cmd = [sys.executable, "-m", "nmtpipe", "run", str(seed_config(folder, direction, max_update))]
    cmd += ["--until", "train", "--quiet"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return save_dir


def score(prepared: Path, models: dict[str, Path], out: Path, nproc: int) -> float:
    """`nmtpipe score` of the prepared dataset; its CPU-seconds."""
    cmd = [sys.executable, "-m", "nmtpipe", "score", "--prepared", str(prepared)]
    cmd += ["--forward", str(models["forward"]), "--backward", str(models["backward"])]
    cmd += ["--output", str(out), "--nproc", str(nproc), "--quiet"]
    return timed(cmd, stdout=subprocess.DEVNULL)


def line_scores(prepared: Path, scores: Path) -> dict[int, float]:
    """Each kept train pair's DCCE, by its line in the noisy corpus (a score file is row
    for row with its shard)."""
    found: dict[int, float] = {}
    for shard in sorted(prepared.glob("train-*-of-*.parquet")):
        lines = pq.read_table(shard, columns=["line"])["line"].to_pylist()
        scored = pq.read_table(scores / shard.name)["dcce"].to_pylist()
        found.update(zip(lines, scored, strict=True))
    return found


def above(kept: set[int], dcce: dict[int, float], cut: float) -> set[int]:
    """The pairs kept whose DCCE is at least `cut` (valid and test pairs: not scored, kept)."""
    return {line for line in kept if dcce.get(line, np.inf) >= cut}


def threshold(kinds: list[str], kept: set[int], dcce: dict[int, float], goal: float) -> float:
    """The highest DCCE threshold at which `shares` of the pairs kept and above it still
    counts `goal` of the clean pairs kept (of all in the corpus)."""
    cuts = sorted({dcce[line] for line in kept & dcce.keys() if kinds[line - 1] == "clean"})
    lo, hi = 0, len(cuts) - 1  # the last cut that keeps enough (the lowest always does)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if shares(kinds, above(kept, dcce, cuts[mid]))["clean"] >= goal:
            lo = mid
        else:
            hi = mid - 1
    return cuts[lo]


def medians(kinds: list[str], scores: Path, prepared: Path) -> dict[str, tuple[float, float]]:
    """Per kind, the median H_fwd and H_bwd of the scored pairs (nats per token)."""
    found: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
    for shard in sorted(prepared.glob("train-*-of-*.parquet")):
        lines = pq.read_table(shard, columns=["line"])["line"].to_pylist()
        table = pq.read_table(scores / shard.name)
        h = zip(table["h_fwd"].to_pylist(), table["h_bwd"].to_pylist(), strict=True)
        for line, pair in zip(lines, h, strict=True):
            found[kinds[line - 1].split()[0]].append(pair)
    return {k: tuple(np.median(np.array(v), axis=0).round(2)) for k, v in found.items() if v}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="a folder for the corpora, models, scores")
    parser.add_argument("--max-update", type=int, default=1200, help="each seed model's updates")
    parser.add_argument("--nproc", type=int, default=2, help="ranks of `nmtpipe score`")
    parser.add_argument("--clean-kept", type=float, default=0.97)
    parser.add_argument("--seed-only", action="store_true", help="train the seed models, stop")
    args = parser.parse_args()
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    entries = mixed(DATA, 5977, 1041, seed=0)
    kinds = [kind.split()[0] for kind, _ in entries]
    write(folder / "noisy", [pair for _, pair in entries])
    seed = unused_tatoeba([pair for _, pair in entries], DATA)
    if not (folder / "seed.en").exists():  # (written again, it would be prepared again)
        write(folder / "seed", seed)
    print(f"seed corpus: {len(seed):,} Tatoeba pairs not in the noisy corpus", flush=True)
    models = {d: train_seed(folder, d, args.max_update) for d in DIRECTIONS}
    if args.seed_only:
        return
    labels = [kind for kind, _ in entries]
    rows: dict[str, dict[str, float]] = {}
    costs, spread = {}, {}
    for name, extra in (("default scorers", []), ("filters", ["--scorers", "none"])):
        sub = folder / name.replace(" ", "-")
        sub.mkdir(exist_ok=True)
        write(sub / "noisy", [pair for _, pair in entries])
        kept, _ = nmtpipe_kept(sub, [*extra, "--num-shards", str(args.nproc)])
        cpu = score(sub / "prepared", models, sub / "scores", args.nproc)
        dcce = line_scores(sub / "prepared", sub / "scores")
        costs[name] = (cpu, len(dcce))
        spread[name] = medians(labels, sub / "scores", sub / "prepared")
        cut = threshold(labels, kept, dcce, args.clean_kept)
        if name == "default scorers":
            rows[name] = shares(labels, kept)
        label = f"{'default scorers' if extra == [] else 'filters'} + DCCE >= {cut:.3g}"
        rows[label] = shares(labels, above(kept, dcce, cut))
    print(f"{len(kinds):,} pairs; the train pairs kept and scored count")
    print("| kept by | " + " | ".join(KINDS) + " |")
    print("| --- " * (len(KINDS) + 1) + "|")
    for name, found in rows.items():
        print(f"| {name} | " + " | ".join(f"{found[k]:.1%}" for k in KINDS) + " |")
    print("median H_fwd / H_bwd (nats per token), filters only: " + ", ".join(
        f"{k} {fwd:.2f}/{bwd:.2f}" for k, (fwd, bwd) in spread["filters"].items()
    ))  # fmt: skip
    for name, (cpu, n) in costs.items():
        print(f"scoring ({name}): {n:,} pairs, {cpu:.1f} CPU-s, {cpu / n * 1000:.2f} CPU-ms/pair")
    print(json.dumps({"kept": rows, "scoring_cpu_s": costs, "medians": spread}))


if __name__ == "__main__":
    main()
