"""Reading tables, TMX and SGML against reading line-aligned files: the cost per pair.

The same generated pairs (`corpora.py`, long-tail text) in the layouts users bring:

- plain: `PREFIX.en` + `PREFIX.zh` (`--trainpref`), read as byte ranges;
- parquet: the `translation` struct, written by Hugging Face `datasets`'
  `Dataset.to_parquet` (`--table`);
- parquet-groups: the same table in row groups of 10,000 rows, as pyarrow's writers or
  a Hub export may cut it, planned as row-group references;
- jsonl: the same records as JSON Lines, as `Dataset.to_json` writes them (`--table`);
- arrow: the same table as the Arrow stream `Dataset.save_to_disk` writes (`--table`);
- tmx: one TMX, as OPUS serves it (`--table`);
- sgml: a WMT-style pair of `.sgm` files (`--train-pair`).

Two measures, each contender in a process of its own, round-robin, medians:

- read: the records of each layout through `corpus/registry.py` (plan, then load
  every chunk) in one process, the CPU seconds per pair (what reading costs, whichever
  worker pays it);
- prepare: `nmtpipe prepare` whole on the local runner with W worker processes, wall
  time and CPU seconds of the process tree (`bench_prepare.watch`).

    python benchmarks/data/bench_inputs.py --pairs 1000000 --repeat 3
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
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
import corpora  # noqa: E402
from bench_prepare import watch  # noqa: E402

LAYOUTS = ("plain", "parquet", "parquet-groups", "jsonl", "arrow", "tmx", "sgml")
BATCH = 100_000  # pairs written at a time


def _batches(prefix: Path):
    with open(f"{prefix}.en", encoding="utf-8") as en, open(f"{prefix}.zh", encoding="utf-8") as zh:
        src, tgt = [], []
        for e, z in zip(en, zh, strict=True):
            src.append(e.rstrip("\n"))
            tgt.append(z.rstrip("\n"))
            if len(src) == BATCH:
                yield src, tgt
                src, tgt = [], []
        if src:
            yield src, tgt


def write_layouts(prefix: Path) -> dict[str, Path]:
    """Each layout of the corpus at `prefix`, written once beside it."""
    out = {"plain": prefix}
    names = {
        "parquet": f"{prefix}.parquet",
        "parquet-groups": f"{prefix}.groups.parquet",
        "jsonl": f"{prefix}.jsonl",
        "arrow": f"{prefix}.saved/data-00000-of-00001.arrow",
        "tmx": f"{prefix}.tmx",
        "sgml": f"{prefix}-src.en.sgm",
    }
    out |= {k: Path(v) for k, v in names.items()}
    if all(p.exists() for p in out.values() if p != prefix):
        return out
    import datasets  # the bench extra's: the Parquet file as `datasets` writes it
    import pyarrow as pa
    import pyarrow.parquet as pq

    datasets.disable_progress_bars()
    struct = pa.struct([("en", pa.string()), ("zh", pa.string())])
    tables = [
        pa.table({"translation": pa.StructArray.from_arrays([pa.array(s), pa.array(t)],
                                                             fields=list(struct))})
        for s, t in _batches(prefix)
    ]  # fmt: skip
    whole = pa.concat_tables(tables)
    dataset = datasets.Dataset(whole)
    dataset.to_parquet(names["parquet"])
    dataset.to_json(names["jsonl"], force_ascii=False)
    dataset.save_to_disk(Path(names["arrow"]).parent)
    pq.write_table(whole, names["parquet-groups"], row_group_size=10_000)
    with open(names["tmx"], "w", encoding="utf-8") as tmx:
        tmx.write('<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n<header '
                  'srclang="en" datatype="plaintext" segtype="sentence" adminlang="en" '
                  'o-tmf="x" creationtool="bench" creationtoolversion="1"/>\n<body>\n')  # fmt: skip
        for src, tgt in _batches(prefix):
            tmx.write("".join(
                f'<tu><tuv xml:lang="en"><seg>{escape(s)}</seg></tuv>'
                f'<tuv xml:lang="zh"><seg>{escape(t)}</seg></tuv></tu>\n'
                for s, t in zip(src, tgt, strict=True)
            ))  # fmt: skip
        tmx.write("</body>\n</tmx>\n")
    ref = Path(_reference(Path(names["sgml"])))
    with (
        open(names["sgml"], "w", encoding="utf-8") as s_out,
        open(ref, "w", encoding="utf-8") as r_out,
    ):
        s_out.write('<srcset setid="bench" srclang="any">\n')
        r_out.write('<refset setid="bench" srclang="any" trglang="zh">\n')
        for n, (src, tgt) in enumerate(_batches(prefix)):
            for side, lines in ((s_out, src), (r_out, tgt)):
                side.write(f'<doc sysid="x" docid="d{n}" genre="news" origlang="en">\n<p>\n')
                side.write("".join(f'<seg id="{i + 1}">{escape(line)}</seg>\n'
                                   for i, line in enumerate(lines)))  # fmt: skip
                side.write("</p>\n</doc>\n")
        s_out.write("</srcset>\n")
        r_out.write("</refset>\n")
    return out


def _reference(source: Path) -> str:
    return str(source).replace("-src.en.sgm", "-ref.zh.sgm")


def _inputs(layout: str, path: Path) -> list[str]:
    """`nmtpipe prepare`'s input options for a layout."""
    if layout == "plain":
        return ["--trainpref", str(path)]
    if layout == "sgml":
        return ["--train-pair", str(path), _reference(path)]
    return ["--table", str(path)]


def read_all(layout: str, path: str) -> dict:
    """Every record of one layout through plan and load, in this process."""
    from nmtpipe.pipelines.workflow.prepare_plan import FilePair, PrepareConfig, resolve_inputs
    from nmtpipe.transforms.corpus import registry

    if layout == "plain":
        values: dict = {"trainpref": (path,)}
    elif layout == "sgml":
        values = {"train_pair": (FilePair(path, _reference(Path(path))),)}
    else:
        values = {"table": (path,)}
    (inp,) = resolve_inputs(PrepareConfig("en", "zh", "unused", **values))
    start, cpu = time.perf_counter(), time.process_time()
    pairs = 0
    for planned in registry.plan(inp, 20_000):
        for chunk in registry.load(planned):
            pairs += chunk.src.count(b"\n") + 1
    return {"pairs": pairs, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu}  # fmt: skip


def _command(measure: str, layout: str, path: Path, workers: int, scorers: str) -> list[str]:
    if measure == "read":
        return [sys.executable, __file__, "--read", layout, "--path", str(path)]
    runner = ["--runner=FnApiRunner", f"--direct_num_workers={workers}",
              "--direct_running_mode=multi_processing"]  # fmt: skip
    return [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh",
            *_inputs(layout, path), "--output", str(WORK / f"prepared-inputs-{layout}"),
            "--force", "--scorers", scorers, *runner]  # fmt: skip


def bench(
    pairs: int, workers: int, layouts: list[str], measures: list[str], repeat: int, scorers: str
) -> list:
    paths = write_layouts(corpora.corpus(pairs))
    rows = []
    for measure in measures:
        runs: dict[str, list[dict]] = {layout: [] for layout in layouts}
        for round_ in range(repeat):
            for layout in layouts:
                result = watch(_command(measure, layout, paths[layout], workers, scorers))
                if measure == "read":
                    inner = json.loads(result["stdout"])
                    assert inner["pairs"] == pairs, (layout, inner)
                    result |= {"seconds": inner["seconds"], "cpu_seconds": inner["cpu_seconds"]}
                runs[layout].append(result)
                print(f"  {measure} round {round_ + 1} {layout:>14} {result['seconds']:7.2f} s, "
                      f"{result['cpu_seconds']:7.2f} CPU s, largest process "
                      f"{_largest(result)} MB", flush=True)  # fmt: skip
        base = statistics.median(r["cpu_seconds"] for r in runs[layouts[0]])
        base_wall = statistics.median(r["seconds"] for r in runs[layouts[0]])
        print(f"\n{measure}, {pairs:,} pairs:\n| layout | median s | runs (s) | median CPU s | "
              f"CPU us/pair | CPU vs {layouts[0]} | wall vs {layouts[0]} | largest process MB |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- |")  # fmt: skip
        for layout, results in runs.items():
            seconds = statistics.median(r["seconds"] for r in results)
            cpu = statistics.median(r["cpu_seconds"] for r in results)
            row = {"measure": measure, "layout": layout, "pairs": pairs,
                   "seconds_median": round(seconds, 2),
                   "seconds_all": [round(r["seconds"], 2) for r in results],
                   "cpu_seconds_median": round(cpu, 2)}  # fmt: skip
            rows.append(row)
            print(f"| {layout} | {seconds:.2f} | {', '.join(map(str, row['seconds_all']))} | "
                  f"{cpu:.2f} | {cpu / pairs * 1e6:.2f} | {cpu / base:.2f}x | "
                  f"{seconds / base_wall:.2f}x | {max(map(_largest, results))} |")  # fmt: skip
    return rows


def _largest(result: dict) -> int:
    """The largest resident memory of any process of a run, in MB."""
    return max(result.get("peak_rss_main_mb") or 0, result.get("peak_rss_worker_mb") or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--measures", default="read,prepare")
    parser.add_argument(
        "--scorers",
        default="none",
        help="prepare's --scorers (default none: the readers are measured, and pair scores "
        "cost the same whatever the layout)",
    )
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--read", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        print(json.dumps(read_all(args.read, args.path)))
        return
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}")
    rows = bench(args.pairs, args.workers, args.layouts.split(","), args.measures.split(","),
                 args.repeat, args.scorers)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
