"""Generate a large en-zh corpus for benchmarks by recombining Tatoeba pairs.

Each output pair joins two or three random pairs of the bundled Tatoeba sample (English
with spaces, Chinese without): with 16k base pairs there are billions of combinations,
so almost every generated pair is distinct and deduplication cannot collapse the
corpus. Deterministic for a given seed.

    python benchmarks/corpora/make_corpus.py --pairs 1000000 --out benchmarks/.work/corpus-1M
"""

from __future__ import annotations

import gzip
import random
from importlib import resources
from pathlib import Path


def load_example() -> list[tuple[str, str]]:
    """Every other pair of the bundled Tatoeba corpus: the 16,014 pairs the corpora of
    every earlier result in RESULTS.md were generated from."""
    folder = resources.files("nmtpipe.pipelines") / "example"
    sides = []
    for lang in ("en", "zh"):
        with gzip.open(str(folder / f"tatoeba-cmn.{lang}.gz"), "rt", encoding="utf-8") as f:
            sides.append(f.read().split("\n")[:-1][::2])
    return list(zip(*sides, strict=True))


def generate(pairs: int, out: str, seed: int = 0) -> None:
    rng = random.Random(seed)
    base = load_example()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with (
        open(f"{out}.en", "w", encoding="utf-8") as en,
        open(f"{out}.zh", "w", encoding="utf-8") as zh,
    ):
        for _ in range(pairs):
            picked = [base[rng.randrange(len(base))] for _ in range(rng.choice((2, 3)))]
            en.write(" ".join(p[0] for p in picked) + "\n")
            zh.write("".join(p[1] for p in picked) + "\n")


if __name__ == "__main__":
    from generator_cli import command_line

    command_line(generate, __doc__)
