"""`nmtpipe vocab` on a generated corpus: time and peak memory; and its T2T builder side
by side with Tensor2Tensor's own code.

Default: for each `--pairs`, the whole `nmtpipe vocab` command, in its own process
watched by psutil, for each of `--models` on the prepared corpus (`corpora.py`: the
long-tail one unless `--corpus recombined`): `t2t` with `--vocab-size 32000` and the
defaults (tokens held in chunks, on disk beyond `--max-characters`), `unigram` joined.
`--exact` also builds the T2T vocabulary with every token in memory (`--max-characters
0`) and checks that its files are the default's, byte for byte.

    python benchmarks/data/bench_vocab.py --pairs 250000 --pairs 1000000 --pairs 4000000 --exact

`--vs-t2t`: T2T's builder alone, nmtpipe's against Tensor2Tensor's own
`build_to_target_size`, from the same token counts (those prepare committed), each in
its own process; the two vocab files must be identical:

- t2t: `shared/tools/t2t_vocab.py build-from-counts`, which runs T2T's own
  `text_encoder.py` from a git mirror (set MIRROR_ROOT or T2T_MIRROR as its README says),
  reading the counts as a TSV file written here;
- nmtpipe: the builder `nmtpipe vocab` uses, reading the counts from the prepared
  Parquet files the way `nmtpipe vocab` does.

    python benchmarks/data/bench_vocab.py --vs-t2t --corpus recombined --pairs 1000000 \\
        --side joined --target 32768 --t2t-tools ../shared/tools
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
sys.path.insert(1, str(HERE.parents[1]))  # the repository
import corpora  # noqa: E402


def side_counts(root: Path, side: str) -> dict[str, int]:
    """A side's token counts, every one (without importing Beam)."""
    from nmtpipe.transforms.storage import manifest
    from nmtpipe.transforms.vocab import counts

    doc = manifest.read_manifest(str(root), "nmtpipe.prepare")
    return counts.read_counts(counts.count_files(str(root), doc, side)[0])


def write_t2t_tsv(counts: dict[str, int], path: Path) -> None:
    """The counts as `t2t_vocab.py` reads them: TOKEN<TAB>COUNT, with `\\` `\t` `\n` `\r`
    escaped in the token."""
    escapes = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(f"{token.translate(escapes)}\t{count}\n" for token, count in counts.items())


def run_nmtpipe(root: str, side: str, target: int, max_length: int | None, out: str) -> dict:
    """The nmtpipe contender, in its own process: read the counts, build, write."""
    from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
    from nmtpipe.transforms.vocab.kinds.subword_build import SubwordBuilder

    start = time.perf_counter()
    counts = side_counts(Path(root), side)
    read = time.perf_counter()
    vocab, trace = SubwordBuilder(counts, max_length).build_to_target_size(target)
    built = time.perf_counter()
    Path(out).write_text(SubwordTextEncoder(vocab).to_text(), encoding="utf-8")
    return {
        "seconds_read_counts": round(read - start, 3),
        "seconds_build": round(built - read, 3),
        "distinct_tokens": len(counts),
        "vocab_size": len(vocab),
        "min_count": trace.chosen,
        "builds": len(trace.steps),
    }


def contenders(args: argparse.Namespace, root: Path, tsv: Path) -> dict[str, list[str]]:
    longest = ["--max-subtoken-length", str(args.max_subtoken_length)]
    nmtpipe = [
        sys.executable,
        __file__,
        "--run",
        str(root),
        "--side",
        args.side,
        "--target",
        str(args.target),
        "--out",
        str(WORK / "vocab-nmtpipe.txt"),
    ]
    return {
        "t2t": [
            sys.executable, str(Path(args.t2t_tools) / "t2t_vocab.py"), "build-from-counts",
            "--counts", str(tsv), "--target-size", str(args.target),
            *(longest if args.max_subtoken_length else []), "--out", str(WORK / "vocab-t2t.txt"),
        ],
        "nmtpipe": nmtpipe + (longest if args.max_subtoken_length else []),
    }  # fmt: skip


def vs_t2t(args: argparse.Namespace, pairs: int) -> dict:
    from bench_prepare import watch

    root = corpora.prepared(pairs, args.corpus)
    counts = side_counts(root, args.side)
    tsv = WORK / f"counts-{args.corpus}-{pairs}.{args.side}.tsv"
    write_t2t_tsv(counts, tsv)
    print(f"{args.side}: {len(counts):,} distinct tokens, {sum(counts.values()):,} in all")
    del counts
    runs: dict[str, list[dict]] = {}
    for round_ in range(args.repeat):
        for name, cmd in contenders(args, root, tsv).items():
            result = watch(cmd)
            result.update(json.loads(result.pop("stdout").strip().splitlines()[-1]))
            runs.setdefault(name, []).append(result)
            print(f"  round {round_ + 1} {name:>8} {result['seconds']:7.1f} s wall, build "
                  f"{result['seconds_build']:7.2f} s, peak RSS {result['peak_rss_main_mb']} MB, "
                  f"{result['vocab_size']:,} subtokens", flush=True)  # fmt: skip
    t2t_file, ours_file = WORK / "vocab-t2t.txt", WORK / "vocab-nmtpipe.txt"
    identical = t2t_file.read_bytes() == ours_file.read_bytes()
    rows = {name: _summary(results) for name, results in runs.items()}
    print(f"vocab files identical: {identical}")
    print("| contender | wall s | build s | runs, build s | peak RSS | subtokens |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in rows.items():
        print(f"| {name} | {r['seconds']} | {r['seconds_build']} | "
              f"{', '.join(map(str, r['builds_all']))} | {r['peak_rss_mb']} MB | "
              f"{r['vocab_size']:,} |")  # fmt: skip
    t2t, ours = rows["t2t"], rows["nmtpipe"]
    print(f"speed-up: {t2t['seconds'] / ours['seconds']:.1f}x wall, "
          f"{t2t['seconds_build'] / ours['seconds_build']:.1f}x build")  # fmt: skip
    return {"side": args.side, "pairs": pairs, "target": args.target,
            "max_subtoken_length": args.max_subtoken_length, "identical": identical,
            "contenders": rows}  # fmt: skip


def _summary(results: list[dict]) -> dict:
    return {
        "seconds": round(statistics.median(r["seconds"] for r in results), 2),
        "seconds_build": round(statistics.median(r["seconds_build"] for r in results), 2),
        "builds_all": [r["seconds_build"] for r in results],
        "peak_rss_mb": max(r["peak_rss_main_mb"] for r in results),
        "vocab_size": results[0]["vocab_size"],
    }


COMMANDS = {
    "t2t": ["--model", "t2t", "--vocab-size", "32000"],
    "t2t-exact": ["--model", "t2t", "--vocab-size", "32000", "--max-characters", "0"],
    "unigram": ["--model", "unigram", "--vocab-size", "32000", "--joined"],
}


def vocab_command(args: argparse.Namespace, pairs: int, name: str) -> dict:
    """`nmtpipe vocab` as a user runs it, in its own process: wall time and peak RSS."""
    from bench_prepare import watch

    root = corpora.prepared(pairs, args.corpus)
    out = WORK / f"vocab-{name}-{args.corpus}-{pairs}"
    cmd = [sys.executable, "-m", "nmtpipe", "vocab", "--prepared", str(root), "--output",
           str(out), *COMMANDS[name], "--force"]  # fmt: skip
    result = watch(cmd)
    doc = json.loads((out / "manifest.json").read_text())
    row = {"pairs": pairs, "vocab": name, "seconds": round(result["seconds"], 1),
           "peak_rss_mb": max(result["peak_rss_main_mb"], result["peak_rss_worker_mb"] or 0),
           "output": str(out), "vocabularies": doc["vocabularies"]}  # fmt: skip
    sizes = ", ".join(f"{side} {v['vocab_size']:,}" for side, v in doc["vocabularies"].items())
    print(f"  {pairs:>10,} {name:>9} {row['seconds']:7.1f} s, peak RSS {row['peak_rss_mb']} MB, "
          f"{sizes}", flush=True)  # fmt: skip
    return row


FILES = ("vocab.en.subwords", "vocab.zh.subwords", "dict.en.txt", "dict.zh.txt")


def identical(a: Path, b: Path) -> bool:
    """Whether two vocabularies' files are the same bytes."""
    return all((a / name).read_bytes() == (b / name).read_bytes() for name in FILES)


def bench(args: argparse.Namespace) -> dict:
    rows, same = [], {}
    for pairs in args.pairs:
        for name in args.models.split(","):
            rows.append(vocab_command(args, pairs, name))
        if args.exact:
            rows.append(vocab_command(args, pairs, "t2t-exact"))
            default = next(r for r in rows if r["pairs"] == pairs and r["vocab"] == "t2t")
            same[pairs] = identical(Path(default["output"]), Path(rows[-1]["output"]))
            print(f"  {pairs:>10,} files identical with every token in memory: {same[pairs]}")
    print("| pairs | vocabulary | wall s | peak RSS | per side: count rows, characters, chunks |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        sides = "; ".join(
            f"{side} {v['count_rows']:,}, {v['characters']:,}, {v['chunks']}"
            if "count_rows" in v else f"{side} {v.get('sample_sentences', 0):,} sentences"
            for side, v in r["vocabularies"].items()
        )  # fmt: skip
        print(
            f"| {r['pairs']:,} | {r['vocab']} | {r['seconds']} | {r['peak_rss_mb']} MB | {sides} |"
        )
    return {"corpus": args.corpus, "rows": rows, "identical": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, action="append", help="corpus sizes (repeatable)")
    parser.add_argument("--models", default="t2t,unigram", help="of: t2t, unigram")
    parser.add_argument("--exact", action="store_true", help="t2t with every token in memory too")
    corpora.add_option(parser)
    parser.add_argument("--vs-t2t", action="store_true", help="against T2T's own builder")
    parser.add_argument("--side", default="joined", help="--vs-t2t: en, zh or joined")
    parser.add_argument("--target", type=int, default=32768, help="--vs-t2t: target size")
    parser.add_argument("--max-subtoken-length", type=int, help="--vs-t2t: T2T's option")
    parser.add_argument("--repeat", type=int, default=1, help="--vs-t2t: rounds (medians)")
    parser.add_argument("--t2t-tools", default=str(HERE.parents[2] / "shared" / "tools"))
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--run", metavar="PREPARED", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:  # the nmtpipe contender of --vs-t2t, in its own process
        result = run_nmtpipe(args.run, args.side, args.target, args.max_subtoken_length, args.out)
        print(json.dumps(result))
        return
    args.pairs = args.pairs or [1_000_000]
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{args.corpus} corpus")  # fmt: skip
    WORK.mkdir(exist_ok=True)
    result = [vs_t2t(args, p) for p in args.pairs] if args.vs_t2t else bench(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
