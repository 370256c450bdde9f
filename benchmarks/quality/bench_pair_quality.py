"""What the pair scorers keep of a noisy corpus, kind by kind, beside OpusFilter.

The corpus is `make_pair_noise.py mixed` (clean Tatoeba and NTREX-128 pairs and about
1,000 pairs of each kind of noise). nmtpipe prepares it with its defaults; OpusFilter
3.3.1 (in a venv of its own: `--opusfilter-python`) scores it with its standard filters
for en-zh and its WordAlignFilter (eflomal, moses and jieba tokenisers), each score cut at
its 10th or 90th percentile, as shared/notes/pair-quality.md measured it. Each tool's
CPU-seconds are its whole process tree's.

A near-duplicate counts as kept when both it and the clean pair it repeats are (one of
the two kept is the corpus holding that pair once: right); the clean pair counts as kept
when it or its near-duplicate is.

    python benchmarks/quality/bench_pair_quality.py --opusfilter-python /tmp/opusfilter/bin/python
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
from make_pair_noise import KINDS, mixed, unused_tatoeba, write  # noqa: E402

DATA = HERE.parents[2] / "shared" / "data"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], **kwargs: object) -> float:
    """CPU-seconds of `cmd`'s process tree (its waited-for descendants)."""
    before = children_cpu()
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]
    return children_cpu() - before


def nmtpipe_kept(folder: Path, extra: list[str]) -> tuple[set[int], float]:
    """The lines nmtpipe keeps (any split) with its defaults, and its CPU-seconds."""
    out = folder / "prepared"
    cmd = [
        sys.executable,
        "-m",
        "nmtpipe",
        "prepare",
        "-s",
        "en",
        "-t",
        "zh",
        "--trainpref",
        str(folder / "noisy"),
        "--output",
        str(out),
        "--force",
        "--quiet",
        *extra,
    ]
    cpu = timed(cmd, stdout=subprocess.DEVNULL)
    kept = set()
    for shard in out.glob("*-of-*.parquet"):
        kept.update(pq.read_table(shard, columns=["line"])["line"].to_pylist())
    return kept, cpu


OPUSFILTER = """
common:
  output_directory: {out}
steps:
  - type: score
    parameters:
      inputs: [{src}, {tgt}]
      output: scores.jsonl.gz
      filters:
        - LengthFilter: {{unit: [word, char], min_length: 1, max_length: 200}}
        - LengthRatioFilter: {{unit: [word, char], threshold: 10}}
        - CharacterScoreFilter: {{scripts: [Latin, Han], thresholds: [0, 0]}}
        - LanguageIDFilter: {{languages: [en, zh], id_method: lingua, thresholds: [0, 0]}}
        - TerminalPunctuationFilter: {{threshold: -100}}
        - NonZeroNumeralsFilter: {{threshold: 0}}
        - RepetitionFilter: {{}}
        - WordAlignFilter:
            src_threshold: 100
            tgt_threshold: 100
            src_tokenizer: [moses, en]
            tgt_tokenizer: [jieba, zh]
            model: 3
"""
# Each OpusFilter score and which way is better: its pairs below the 10th percentile of a
# higher-is-better score, or above the 90th of a lower-is-better one, are dropped.
HIGHER = {
    "CharacterScoreFilter": True,
    "LanguageIDFilter": True,
    "TerminalPunctuationFilter": True,
    "NonZeroNumeralsFilter": True,
    "LengthRatioFilter": False,
    "RepetitionFilter": False,
    "WordAlignFilter": False,
}


def opusfilter_kept(folder: Path, python: str) -> tuple[set[int], float]:
    """The lines OpusFilter keeps, and its CPU-seconds."""
    config = folder / "opusfilter.yaml"
    out = folder / "opusfilter"
    out.mkdir(exist_ok=True)
    src, tgt = (folder / "noisy.en").resolve(), (folder / "noisy.zh").resolve()
    config.write_text(OPUSFILTER.format(out=out, src=src, tgt=tgt))
    runner = Path(python).with_name("opusfilter")
    cpu = timed(
        [str(runner), "--overwrite", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with gzip.open(out / "scores.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    keep = np.ones(len(rows), dtype=bool)
    for name, higher in HIGHER.items():
        values = np.array(
            [
                np.ravel(r[name] if not isinstance(r[name], dict) else list(r[name].values()))
                for r in rows
            ],
            dtype=float,
        )
        for column in values.T:
            cut = np.percentile(column, 10 if higher else 90)
            keep &= column >= cut if higher else column <= cut
    lengths = np.array([r["LengthFilter"] for r in rows], dtype=float)
    keep &= (lengths >= 1).all(axis=1) & (lengths <= 200).all(axis=1)
    return {i + 1 for i in np.flatnonzero(keep).tolist()}, cpu


def shares(kinds: list[str], kept: set[int]) -> dict[str, float]:
    """The share kept of each kind (near-duplicates and clean pairs as the module says)."""
    copies = {}
    for line, kind in enumerate(kinds, 1):
        if kind.startswith("neardup"):
            copies[line] = int(kind.split()[1])
    rescued = {original for copy, original in copies.items() if copy in kept}
    found: dict[str, list[bool]] = {k: [] for k in KINDS}
    for line, kind in enumerate(kinds, 1):
        name = kind.split()[0]
        if name == "neardup":
            found[name].append(line in kept and copies[line] in kept)
        elif name == "clean":
            found[name].append(line in kept or line in rescued)
        else:
            found[name].append(line in kept)
    return {k: float(np.mean(v)) if v else float("nan") for k, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--opusfilter-python", help="a python with opusfilter[eflomal] and jieba")
    parser.add_argument("--clean", type=int, default=5977)
    parser.add_argument("--each", type=int, default=1041)
    parser.add_argument("--nmtpipe-options", default="", help="more `nmtpipe prepare` options")
    parser.add_argument(
        "--trusted",
        action="store_true",
        help="a second nmtpipe row: the scorers also learn from the Tatoeba pairs the noisy "
        "corpus does not use (--trustedpref)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        entries = mixed(DATA, args.clean, args.each, seed=0)
        write(folder / "noisy", [pair for _, pair in entries])
        kinds = [kind for kind, _ in entries]
        rows = {}
        kept, cpu = nmtpipe_kept(folder, args.nmtpipe_options.split())
        rows["nmtpipe"] = (shares(kinds, kept), cpu)
        if args.trusted:
            trusted = unused_tatoeba([pair for _, pair in entries], DATA)
            write(folder / "trusted", trusted)
            extra = [*args.nmtpipe_options.split(), "--trustedpref", str(folder / "trusted")]
            kept, cpu = nmtpipe_kept(folder, extra)
            rows[f"nmtpipe, {len(trusted):,} trusted pairs"] = (shares(kinds, kept), cpu)
        if args.opusfilter_python:
            kept, cpu = opusfilter_kept(folder, args.opusfilter_python)
            rows["OpusFilter 3.3.1"] = (shares(kinds, kept), cpu)
    count = Counter(k.split()[0] for k in kinds)
    print(f"{len(kinds):,} pairs: " + ", ".join(f"{k} {count[k]:,}" for k in KINDS))
    print("| tool | " + " | ".join(KINDS) + " | CPU-s per 1k pairs |")
    print("| --- " * (len(KINDS) + 2) + "|")
    for name, (found, cpu) in rows.items():
        cells = " | ".join(f"{found[k]:.1%}" for k in KINDS)
        print(f"| {name} | {cells} | {cpu / len(kinds) * 1000:.2f} |")
    print(json.dumps({name: {"kept": found, "cpu_s": cpu} for name, (found, cpu) in rows.items()}))


if __name__ == "__main__":
    main()
