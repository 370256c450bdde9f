"""How fast distinct tokens grow in real and generated corpora: type/token curves and
Heaps' law fits.

Counts Tensor2Tensor tokens (`t2t_tokenizer.encode` after NFKC) of each side of the
bundled real corpora (Tatoeba, NTREX-128 news) and of the two benchmark generators:
`make_corpus.py`, which recombines Tatoeba pairs and so stops finding new tokens, and
`make_long_tail_corpus.py`, whose English is tuned to NTREX-128's law. Fits
V = K·N^β by least squares on log-log over the curve's points with N ≥ 1000 (20 per
decade, and the last), and prints two Markdown tables for RESULTS.md: the fits, and the
types after the same numbers of tokens, next to what the real fits extrapolate to.
Generated corpora are read from benchmarks/.work (`corpora.py` makes them there if
missing); every file is read line by line, holding only its set of types.

    python benchmarks/corpora/heaps.py
    python benchmarks/corpora/heaps.py --pairs 4000000 --pairs 10000000
"""

from __future__ import annotations

import argparse
import gzip
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from nmtpipe.transforms.text.t2t_tokenizer import encode

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]

import corpora  # noqa: E402

PAIRS = (10_000, 100_000, 1_000_000)
CHECKPOINTS = (1_000, 10_000, 50_000, 250_000, 1_000_000, 10_000_000)
FIT_FROM = 1_000
PER_DECADE = 20
REAL = (("Tatoeba", "tatoeba-cmn"), ("NTREX-128 news", "ntrex128-enzh"))
GENERATORS = {  # name: corpora.py's kind
    "make_corpus.py (recombined Tatoeba)": "recombined",
    "make_long_tail_corpus.py": "longtail",
}
# The laws the generated sides are compared with (Tatoeba's lines are sorted by length,
# so its curve is no law to extrapolate).
TARGET = "NTREX-128 news"


@dataclass(frozen=True)
class Curve:
    """A corpus side's distinct tokens after N tokens, at a grid of N and at CHECKPOINTS."""

    corpus: str
    side: str
    lines: int
    tokens: int
    types: int
    points: np.ndarray  # (n, 2): N, types after N tokens
    at: dict[int, int]

    def fit(self) -> tuple[float, float]:
        """β and K of V = K·N^β, least squares on log-log over N ≥ FIT_FROM."""
        kept = self.points[self.points[:, 0] >= FIT_FROM]
        beta, log_k = np.polyfit(np.log(kept[:, 0]), np.log(kept[:, 1]), 1)
        return float(beta), float(np.exp(log_k))


def marks() -> np.ndarray:
    """The token counts a curve is sampled at: PER_DECADE a decade, and CHECKPOINTS."""
    grid = np.round(10 ** np.arange(0, 12, 1 / PER_DECADE)).astype(np.int64)
    return np.unique(np.concatenate([grid, CHECKPOINTS]))


def curve(corpus: str, side: str, lines: Iterator[str]) -> Curve:
    """Count one side's types as its tokens stream by; a line in which a mark falls is
    added token by token, so that the types at each mark are exact."""
    seen: set[str] = set()
    grid = marks().tolist()
    points: list[tuple[int, int]] = []
    n = count = 0
    for line in lines:
        tokens = encode(unicodedata.normalize("NFKC", line))
        count += 1
        if n + len(tokens) < grid[len(points)]:
            seen.update(tokens)
            n += len(tokens)
            continue
        for token in tokens:
            seen.add(token)
            n += 1
            if n == grid[len(points)]:
                points.append((n, len(seen)))
    if not points or points[-1][0] != n:
        points.append((n, len(seen)))
    at = {n: v for n, v in points if n in CHECKPOINTS}
    return Curve(corpus, side, count, n, len(seen), np.array(points, dtype=np.float64), at)


def read(path: Path) -> Iterator[str]:
    """The lines of a plain or gzipped UTF-8 file, one at a time, without line ends
    (NTREX-128's CRLF included)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield line.rstrip("\n")


def real_curves() -> list[Curve]:
    folder = Path(str(resources.files("nmtpipe.pipelines") / "example"))
    return [curve(name, side, read(folder / f"{stem}.{side}.gz"))
            for name, stem in REAL for side in ("en", "zh")]  # fmt: skip


def generated_curves(pairs: list[int]) -> list[Curve]:
    curves = []
    for name, kind in GENERATORS.items():
        for n in pairs:
            prefix = corpora.corpus(n, kind)
            curves += [curve(name, side, read(Path(f"{prefix}.{side}"))) for side in ("en", "zh")]
    return curves


def fits_table(curves: list[Curve]) -> str:
    rows = [
        "| corpus | side | pairs | tokens | types | β | K |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in curves:
        beta, k = c.fit()
        rows.append(
            f"| {c.corpus} | {c.side} | {c.lines:,} | {c.tokens:,} | {c.types:,} "
            f"| {beta:.3f} | {k:.2f} |"
        )
    return "\n".join(rows)


def matched_table(curves: list[Curve]) -> str:
    """Types after CHECKPOINTS tokens: the real sides, their laws extrapolated, and the
    largest corpus of each generator."""
    head = " | ".join(f"{n:,}" for n in CHECKPOINTS)
    rows = [
        f"| corpus | side | {head} |",
        "| --- | --- |" + " --- |" * len(CHECKPOINTS),
    ]
    largest = {}
    for c in curves:
        if c.corpus in GENERATORS:
            largest[c.corpus, c.side] = c
        else:
            rows.append(row(c.corpus, c.side, [c.at.get(n) for n in CHECKPOINTS]))
    for c in curves:
        if c.corpus == TARGET:
            beta, k = c.fit()
            law = [round(k * n**beta) for n in CHECKPOINTS]
            rows.append(row(f"{TARGET} law {k:.2f}·N^{beta:.3f}", c.side, law))
    rows += [row(f"{c.corpus}, {c.lines:,} pairs", c.side, [c.at.get(n) for n in CHECKPOINTS])
             for c in largest.values()]  # fmt: skip
    return "\n".join(rows)


def row(corpus: str, side: str, values: list[int | None]) -> str:
    cells = " | ".join("—" if v is None else f"{v:,}" for v in values)
    return f"| {corpus} | {side} | {cells} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pairs",
        type=int,
        action="append",
        default=[],
        help="a generated corpus size to add to 10k, 100k and 1M pairs (repeatable)",
    )
    args = parser.parse_args()
    pairs = sorted({*PAIRS, *args.pairs})
    curves = real_curves() + generated_curves(pairs)
    print(fits_table(curves))
    print()
    print(matched_table(curves))


if __name__ == "__main__":
    main()
