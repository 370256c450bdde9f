"""What pair scores are worth in BLEU: the demo's model (`nmtpipe run --example`'s
workflow) trained on the bundled Tatoeba corpus, on it with noise added, and on it with
noise added and the default scorers on, each tested on the same fixed test set.

The corpus is `make_pair_noise.py demo` (a fixed 2% test set by source, the rest clean,
and 12,000 pairs of noise made from the clean part: 6,000 misaligned, 3,000 partial,
3,000 shuffled). The runs differ only in their training inputs and `scorers`:

    clean                   the clean pairs, the default scorers
    noisy, unfiltered       clean + noise, --scorers none (the filters alone)
    noisy, default scorers  clean + noise, the default scorers (rules, lexical, length,
                            neardup)
    noisy, all scorers      clean + noise, --scorers all (fluency too)
    noisy, trusted pairs    clean + noise, the default scorers learning from the
                            trusted pairs too and thresholds set by them
                            (--trustedpref; needs --trusted-share)
    noisy, trusted pairs, all scorers   likewise, --scorers all

With `--trusted-share F`, F of the clean sources are set apart as trusted pairs before
the noise is made (`make_pair_noise.demo`): no run trains on them. With `--seeds`, each
run trains once per seed (the model's initialisation, dropout and batch order; the same
data), and the table gives each seed's BLEU and their mean.

    python benchmarks/quality/bench_noise_bleu.py --out /tmp/noise-bleu
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
from make_pair_noise import DATA, demo, write  # noqa: E402

RUNS = {
    "clean": (["clean"], None),
    "noisy, unfiltered": (["clean", "noise"], "none"),
    "noisy, default scorers": (["clean", "noise"], None),
    "noisy, all scorers": (["clean", "noise"], "all"),
    "noisy, trusted pairs": (["clean", "noise"], None),
    "noisy, trusted pairs, all scorers": (["clean", "noise"], "all"),
}


def config(
    folder: Path, root: Path, inputs: list[str], scorers: str | None, trusted: bool, seed: int
) -> Path:
    """The demo's workflow with these training inputs, the fixed test set and this
    training seed."""
    bundled = resources.files("nmtpipe.pipelines") / "example" / "example.yaml"
    doc = yaml.safe_load(bundled.read_text(encoding="utf-8"))
    doc["root"] = str(root)
    prepare = {k: v for k, v in doc["prepare"].items() if k not in ("example", "test_fraction")}
    prepare.update(
        src_lang="en",
        tgt_lang="zh",
        trainpref=[str(folder / i) for i in inputs],
        testpref=[str(folder / "test")],
    )
    if scorers is not None:
        prepare["scorers"] = scorers
    if trusted:
        prepare["trustedpref"] = [str(folder / "trusted")]
    doc["prepare"] = prepare
    doc["train"]["seed"] = seed
    doc.pop("evaluate", None)
    path = root.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="a folder for the corpus and the runs")
    parser.add_argument("--runs", default=";".join(list(RUNS)[:4]), help="runs, separated by ;")
    parser.add_argument("--trusted-share", type=float, default=0.0, help="sources set apart")
    parser.add_argument("--seeds", default="1", help="training seeds, separated by commas")
    args = parser.parse_args()
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = demo(DATA, seed=0, trusted_share=args.trusted_share)
    if any("trusted" in run for run in args.runs.split(";")) and "trusted" not in corpus:
        parser.error("the runs with trusted pairs need --trusted-share")
    for name, pairs in corpus.items():
        write(folder / name, pairs)
        print(f"{name}: {len(pairs):,} pairs", flush=True)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    rows = []
    for name in args.runs.split(";"):
        rows.append((name, *(run(folder, name, seed) for seed in seeds)))
    print("| training data | pairs read | train pairs kept | test BLEU by seed | mean |")
    print("| --- | --- | --- | --- | --- |")
    for name, *results in rows:
        read, kept = results[0][:2]
        bleu = [result[2] for result in results]
        each = ", ".join(f"{b:.2f}" for b in bleu)
        print(f"| {name} | {read:,} | {kept:,} | {each} | {sum(bleu) / len(bleu):.2f} |")


def run(folder: Path, name: str, seed: int) -> tuple[int, int, float]:
    """One run trained from scratch: (pairs read, train pairs kept, test BLEU)."""
    inputs, scorers = RUNS[name]
    root = folder / f"{name.replace(', ', '-').replace(' ', '-')}-seed{seed}"
    shutil.rmtree(root, ignore_errors=True)  # a fresh model each time
    workflow = config(folder, root, inputs, scorers, "trusted" in name, seed)
    cmd = [sys.executable, "-m", "nmtpipe", "run", str(workflow), "--json", "--quiet"]
    done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    result = json.loads(done.stdout)["result"]
    stats = json.loads((root / "prepared" / "stats.json").read_text(encoding="utf-8"))
    print(name, f"seed {seed}", json.dumps(result["scores"]), flush=True)
    return stats["pairs_read"], stats["splits"]["train"], result["scores"]["test"]["bleu"]


if __name__ == "__main__":
    main()
