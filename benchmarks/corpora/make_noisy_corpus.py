"""A noisy en-zh corpus from real data, for language identification and decontamination.

Three training inputs and a test input, each a pair of line-aligned files:

- `clean.{en,zh}`: every Tatoeba pair (shared/data/tatoeba-cmn) and the NTREX-128
  pairs outside the test set: correct translations, many of them short;
- `wrong.{en,zh}`: NTREX-128 sentences 1-300 (shared/data/ntrex128-langid) with a
  Japanese or a Korean target, or a German or a French source: 1,200 pairs of which
  one side is in the wrong language;
- `leaked.{en,zh}`: the 300 test pairs, copied into the training data;
- `test.{en,zh}`: NTREX-128 sentences 1001-1300.

`nmtpipe prepare`'s per-input statistics then say how many of each kind it kept.

    python benchmarks/corpora/make_noisy_corpus.py --out benchmarks/.work/noisy
"""

from __future__ import annotations

import argparse
from pathlib import Path

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
TEST = slice(1000, 1300)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def _write(prefix: Path, en: list[str], zh: list[str]) -> None:
    assert len(en) == len(zh)
    for lang, side in (("en", en), ("zh", zh)):
        Path(f"{prefix}.{lang}").write_text("\n".join(side) + "\n", encoding="utf-8")


def corpus(data: Path) -> dict[str, tuple[list[str], list[str]]]:
    """The four inputs, by name: (English lines, Chinese lines)."""
    tat_en, tat_zh = (_lines(data / "tatoeba-cmn" / f"tatoeba-cmn.{x}") for x in ("en", "zh"))
    nt_en, nt_zh = (_lines(data / "ntrex128-enzh" / f"ntrex128-enzh.{x}") for x in ("en", "zh"))
    test = set(range(len(nt_en))[TEST])
    keep = [i for i in range(len(nt_en)) if i not in test]
    lid = {k: _lines(data / "ntrex128-langid" / f"ntrex128-{k}.txt")
           for k in ("eng", "zho-CN", "jpn", "kor", "deu", "fra")}  # fmt: skip
    wrong_en = lid["eng"] * 2 + lid["deu"] + lid["fra"]
    wrong_zh = lid["jpn"] + lid["kor"] + lid["zho-CN"] * 2
    return {
        "clean": (tat_en + [nt_en[i] for i in keep], tat_zh + [nt_zh[i] for i in keep]),
        "wrong": (wrong_en, wrong_zh),
        "leaked": (nt_en[TEST], nt_zh[TEST]),
        "test": (nt_en[TEST], nt_zh[TEST]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the four file pairs")
    parser.add_argument("--data", default=str(DATA), help="shared/data")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (en, zh) in corpus(Path(args.data)).items():
        _write(out / name, en, zh)
        print(f"{out / name}.{{en,zh}}: {len(en):,} pairs")


if __name__ == "__main__":
    main()
