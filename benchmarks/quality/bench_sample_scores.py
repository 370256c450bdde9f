"""Whether pairs inside and outside the learned sample are judged alike, prepared with a
sample (`--learn-pairs`): on the noisy corpus, each kind's share kept in the sample and
out of it by the learned scores alone; on any corpus (`--trainpref`), the share of the
`lexical` rejects that are of the sample, against the sample's share of the pairs.

The learned scorers learn from the pairs whose id lies below a limit
(`transforms/quality/base.py`); the pairs they learned from are the `learned` (from
stats.json) smallest ids of the pairs the shard writers scored: those kept, and those
the writers rejected (the learned scores, near-duplicates, exact duplicates, overlap).
Pairs the rules rejected before are in neither group. Both groups are random draws of
the same corpus, so scorers that treat all pairs alike keep the same share of each kind
in both, and take as many rejects from each as it holds. (Near-duplicates are left out
of the kinds' shares: which copy of a group stays goes by the smallest id, and so by
the group.)

    python benchmarks/quality/bench_sample_scores.py --learn-pairs 6000
    python benchmarks/quality/bench_sample_scores.py --learn-pairs 200000 \\
        --trainpref benchmarks/.work/longtail-1000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from bench_pair_quality import DATA, mixed, write

KINDS = ("clean", "misaligned", "partial", "shuffled")  # the kinds the rules leave to them
LEARNED = ("lexical", "length", "fluency")
WRITERS = (*LEARNED, "near-duplicate", "duplicate", "overlap")


def prepare(corpus: str, out: Path, learn_pairs: int, extra: list[str]) -> Path:
    cmd = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh"]
    cmd += ["--trainpref", corpus, "--output", str(out), "--force", "--quiet"]
    subprocess.run([*cmd, "--learn-pairs", str(learn_pairs), *extra], check=True)
    return out


def scored(out: Path) -> tuple[pa.Table, np.ndarray]:
    """(line, id, reason: "" where kept) of every pair the shard writers scored, and
    which of them the scorers learned from."""
    kept = [pq.read_table(p, columns=["line", "id"]) for p in sorted(out.glob("*-of-*.parquet"))]
    tables = [t.append_column("reason", pa.array([""] * t.num_rows)) for t in kept]
    for path in sorted((out / "rejects").glob("*.parquet")):
        rejects = pq.read_table(path, columns=["line", "id", "reason"])
        tables.append(rejects.filter(pc.is_in(rejects["reason"], pa.array(WRITERS))))
    table = pa.concat_tables(tables)
    learned = json.loads((out / "stats.json").read_text())["learned"]["lexical"]
    ids = table["id"].to_numpy()
    return table, ids <= np.sort(ids)[learned - 1]


def by_kind(kinds: list[str], table: pa.Table, inside: np.ndarray) -> dict[str, dict]:
    """{group: {kind: share the learned scores kept}}, each group's share of clean pairs
    `lexical` took, and its pairs."""
    reasons = np.asarray(table["reason"].to_pylist(), dtype=object)
    kind = np.asarray([kinds[line - 1].split()[0] for line in table["line"].to_pylist()])
    found: dict[str, dict] = {}
    for group, rows in (("inside", inside), ("outside", ~inside)):
        judged = rows & ~np.isin(reasons, ["near-duplicate", "duplicate", "overlap"])
        learned_out = np.isin(reasons, LEARNED)
        cells = {k: float(np.mean(~learned_out[judged & (kind == k)])) for k in KINDS}
        clean = rows & (kind == "clean")
        cells["clean, lexical rejects"] = float(np.mean(reasons[clean] == "lexical"))
        cells["pairs"] = int(rows.sum())
        found[group] = cells
    return found


def noisy(learn_pairs: int, extra: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        entries = mixed(DATA, 5977, 1041, seed=0)
        write(folder / "noisy", [pair for _, pair in entries])
        out = prepare(str(folder / "noisy"), folder / "prepared", learn_pairs, extra)
        found = by_kind([kind for kind, _ in entries], *scored(out))
    columns = [*KINDS, "clean, lexical rejects"]
    print("| group | pairs | " + " | ".join(columns) + " |")
    print("| --- " * (len(columns) + 2) + "|")
    for group, cells in found.items():
        shown = " | ".join(f"{cells[c]:.1%}" for c in columns)
        print(f"| {group} | {cells['pairs']:,} | {shown} |")
    print(json.dumps(found))


def rejects_inside(corpus: str, learn_pairs: int, extra: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table, inside = scored(prepare(corpus, Path(tmp) / "prepared", learn_pairs, extra))
    lexical = np.asarray(table["reason"].to_pylist(), dtype=object) == "lexical"
    found = {
        "pairs scored": int(inside.size),
        "the sample's share of them": float(inside.mean()),
        "lexical rejects": int(lexical.sum()),
        "the sample's share of those": float(inside[lexical].mean()) if lexical.any() else None,
    }
    print(json.dumps(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learn-pairs", type=int, default=6000)
    parser.add_argument("--trainpref", help="a corpus of en-zh pairs (default: the noisy one)")
    parser.add_argument("--nmtpipe-options", default="", help="more `nmtpipe prepare` options")
    args = parser.parse_args()
    extra = args.nmtpipe_options.split()
    if args.trainpref:
        rejects_inside(args.trainpref, args.learn_pairs, extra)
    else:
        noisy(args.learn_pairs, extra)


if __name__ == "__main__":
    main()
