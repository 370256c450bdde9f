"""`nmtpipe vocab`'s Tensor2Tensor builder side by side with Tensor2Tensor's own code.

Both contenders build a SubwordTextEncoder with `build_to_target_size` from the same
token counts — those `nmtpipe prepare` committed for a generated corpus — and write the
vocab file:

- t2t: `shared/tools/t2t_vocab.py build-from-counts`, which runs T2T's own
  `text_encoder.py` from a git mirror (set MIRROR_ROOT or T2T_MIRROR as its README says),
  reading the counts as a TSV file written here;
- nmtpipe: the builder `nmtpipe vocab` uses, reading the counts from the prepared
  Parquet files the way `nmtpipe vocab` does.

Each runs in its own process, watched by psutil for wall time and peak resident memory;
both also report the seconds of the build alone. The two vocab files must be identical.
`--caps` then rebuilds with `--max-tokens-in-memory`-style caps (a fraction of the
distinct tokens) and reports what the cap costs: peak memory, the vocabulary's size and
overlap with the uncapped one, and how many more subtokens the validation split needs.

    python benchmarks/bench_vocab.py --pairs 1000000 --side joined --target 32768 \\
        --t2t-tools ../shared/tools
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"


def prepared(pairs: int) -> Path:
    """The generated corpus of `pairs` pairs, prepared (nmtpipe's cache makes reruns free;
    a cached output from other code or options is replaced)."""
    from bench_prepare import corpus

    out = WORK / f"prepared-{pairs}"
    cmd = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh",
           "--trainpref", str(corpus(pairs)), "--output", str(out)]  # fmt: skip
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run([*cmd, "--force"], check=True, stdout=subprocess.DEVNULL)
    return out


def side_counts(root: Path, side: str, limit: int | None = None) -> dict[str, int]:
    """A side's token counts, read as `nmtpipe vocab` reads them (without importing Beam)."""
    from nmtpipe.transforms.storage import manifest
    from nmtpipe.transforms.vocab import counts

    doc = manifest.read_manifest(str(root), "nmtpipe.prepare")
    return counts.read_counts(counts.count_files(str(root), doc, side)[0], limit)


def write_t2t_tsv(counts: dict[str, int], path: Path) -> None:
    """The counts as `t2t_vocab.py` reads them: TOKEN<TAB>COUNT, with `\\` `\t` `\n` `\r`
    escaped in the token."""
    escapes = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(f"{token.translate(escapes)}\t{count}\n" for token, count in counts.items())


def run_nmtpipe(root: str, side: str, target: int, max_length: int | None, cap: int | None,
                out: str) -> dict:  # fmt: skip
    """The nmtpipe contender, in its own process: read the counts, build, write."""
    from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
    from nmtpipe.transforms.vocab.kinds.subword_build import SubwordBuilder

    start = time.perf_counter()
    counts = side_counts(Path(root), side, cap)
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


def valid_lines(root: Path, side: str) -> list[str]:
    doc = json.loads((root / "manifest.json").read_text())
    langs = doc["options"]["languages"]
    columns = ["src", "tgt"] if side == "joined" else ["src" if side == langs["src"] else "tgt"]
    lines: list[str] = []
    for path in doc["splits"]["valid"]["files"]:
        table = pq.read_table(root / path, columns=columns)
        for column in columns:
            lines += table[column].to_pylist()
    return lines


def subtokens(vocab_file: Path, lines: list[str]) -> int:
    from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder

    encoder = SubwordTextEncoder.from_file(str(vocab_file))
    return sum(len(encoder.encode(line)) for line in lines)


def contenders(args: argparse.Namespace, root: Path, tsv: Path) -> dict[str, list[str]]:
    longest = ["--max-subtoken-length", str(args.max_subtoken_length)]
    return {
        "t2t": [
            sys.executable, str(Path(args.t2t_tools) / "t2t_vocab.py"), "build-from-counts",
            "--counts", str(tsv), "--target-size", str(args.target),
            *(longest if args.max_subtoken_length else []), "--out", str(WORK / "vocab-t2t.txt"),
        ],
        "nmtpipe": _nmtpipe_cmd(args, root, None, WORK / "vocab-nmtpipe.txt"),
    }  # fmt: skip


def _nmtpipe_cmd(args: argparse.Namespace, root: Path, cap: int | None, out: Path) -> list[str]:
    cmd = [sys.executable, __file__, "--run", str(root), "--side", args.side,
           "--target", str(args.target), "--out", str(out)]  # fmt: skip
    if args.max_subtoken_length:
        cmd += ["--max-subtoken-length", str(args.max_subtoken_length)]
    if cap:
        cmd += ["--cap", str(cap)]
    return cmd


def bench(args: argparse.Namespace) -> dict:
    from bench_prepare import watch

    root = prepared(args.pairs)
    counts = side_counts(root, args.side)
    tsv = WORK / f"counts-{args.pairs}.{args.side}.tsv"
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
    capped = caps(args, root, ours_file) if args.caps else []
    return {"side": args.side, "pairs": args.pairs, "target": args.target,
            "max_subtoken_length": args.max_subtoken_length, "identical": identical,
            "contenders": rows, "caps": capped}  # fmt: skip


def _summary(results: list[dict]) -> dict:
    return {
        "seconds": round(statistics.median(r["seconds"] for r in results), 2),
        "seconds_build": round(statistics.median(r["seconds_build"] for r in results), 2),
        "builds_all": [r["seconds_build"] for r in results],
        "peak_rss_mb": max(r["peak_rss_main_mb"] for r in results),
        "vocab_size": results[0]["vocab_size"],
    }


def caps(args: argparse.Namespace, root: Path, full_file: Path) -> list[dict]:
    """What keeping only the most frequent tokens does to the vocabulary and its use."""
    from bench_prepare import watch

    lines = valid_lines(root, args.side)
    full = set(full_file.read_text(encoding="utf-8").splitlines())
    base = subtokens(full_file, lines)
    rows = []
    print(f"caps: validation split, {len(lines):,} lines, {base:,} subtokens uncapped")
    print("| cap (tokens kept) | build s | peak RSS | subtokens | min_count | shared with uncapped "
          "| validation subtokens |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    distinct = len(side_counts(root, args.side))
    for fraction in (float(f) for f in args.caps.split(",")):
        cap = round(distinct * fraction)
        out = WORK / f"vocab-nmtpipe-cap{cap}.txt"
        result = watch(_nmtpipe_cmd(args, root, cap, out))
        result.update(json.loads(result.pop("stdout").strip().splitlines()[-1]))
        vocab = set(out.read_text(encoding="utf-8").splitlines())
        used = subtokens(out, lines)
        row = {"cap": cap, "fraction": fraction, **result,
               "shared": len(vocab & full) / len(full), "valid_subtokens": used,
               "valid_increase": used / base - 1}  # fmt: skip
        rows.append(row)
        print(f"| {cap:,} ({fraction:.0%}) | {result['seconds_build']} | "
              f"{result['peak_rss_main_mb']} MB | {result['vocab_size']:,} | "
              f"{result['min_count']} | {row['shared']:.1%} | "
              f"{used:,} (+{row['valid_increase']:.2%}) |", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000, help="generated corpus size")
    parser.add_argument("--side", default="joined", help="en, zh or joined (default)")
    parser.add_argument("--target", type=int, default=32768, help="target vocabulary size")
    parser.add_argument("--max-subtoken-length", type=int, help="T2T's max_subtoken_length")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; medians are reported")
    parser.add_argument("--caps", default="", help="fractions of distinct tokens, e.g. 0.5,0.1")
    parser.add_argument("--t2t-tools", default=str(HERE.parent.parent / "shared" / "tools"))
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--run", metavar="PREPARED", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:  # the nmtpipe contender, in its own process
        result = run_nmtpipe(
            args.run, args.side, args.target, args.max_subtoken_length, args.cap, args.out
        )
        print(json.dumps(result))
        return
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}")
    WORK.mkdir(exist_ok=True)
    result = bench(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.path.insert(1, str(HERE.parent))
    main()
