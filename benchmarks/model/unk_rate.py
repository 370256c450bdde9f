"""How often a SentencePiece vocabulary meets a character it cannot encode.

Trains two SentencePiece models on the same prepared corpus with `nmtpipe vocab`, one
with `--byte-fallback` and one without, and encodes the target side of held-out text
with each (normalised as `prepare` does): the share of sentences and of characters that
become `<unk>`, and whether decoding gives the normalised sentence back. An `<unk>` in
a reference becomes `⁇` in a hypothesis, so this is the rate at which the demo would
print `⁇`.

    python benchmarks/model/unk_rate.py --prepared runs/example/prepared --side zh \\
        --text pipelines/example/ntrex128-enzh.zh.gz --vocab-size 4000
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import sentencepiece as spm

from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer


def lines_of(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return [line.rstrip("\r\n") for line in f]


def split_text(prepared: Path, split: str, side: str) -> list[str]:
    return [t for f in sorted(prepared.glob(f"{split}-*.parquet"))
            for t in pq.read_table(f, columns=[side]).column(side).to_pylist()]  # fmt: skip


def unk_figures(model: spm.SentencePieceProcessor, lines: list[str]) -> dict[str, float]:
    """Unknown characters, sentences holding one, and exact round trips, over `lines`."""
    unknown: dict[str, bool] = {}
    chars = unk_chars = unk_sentences = exact = 0
    for line in lines:
        for c in line:
            if c not in unknown:
                unknown[c] = model.unk_id() in model.encode(c)
        missing = sum(unknown[c] for c in line)
        chars += len(line)
        unk_chars += missing
        unk_sentences += missing > 0
        exact += model.decode(model.encode(line)) == line
    n = max(len(lines), 1)
    return {
        "sentences": len(lines),
        "unk_sentence_share": round(unk_sentences / n, 4),
        "unk_char_share": round(unk_chars / max(chars, 1), 5),
        "exact_round_trip_share": round(exact / n, 4),
    }


def train_vocab(prepared: Path, output: Path, size: int, byte_fallback: bool) -> Path:
    argv = [sys.executable, "-m", "nmtpipe", "vocab", "--prepared", str(prepared),
            "--output", str(output), "--model", "unigram", "--joined",
            "--vocab-size", str(size), "--normalization-rule", "identity"]  # fmt: skip
    if byte_fallback:
        argv.append("--byte-fallback")
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return output / "spm.model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepared", type=Path, required=True)
    parser.add_argument("--side", default="tgt", choices=("src", "tgt"))
    parser.add_argument("--text", action="append", default=[], help="more held-out text files")
    parser.add_argument("--vocab-size", type=int, default=4000)
    args = parser.parse_args()
    normalizer = Normalizer(NormalizeConfig())
    sets = {"test split": split_text(args.prepared, "test", args.side)}
    sets |= {Path(t).name: normalizer.batch(lines_of(t)) for t in args.text}
    with tempfile.TemporaryDirectory() as tmp:
        for fallback in (False, True):
            path = train_vocab(args.prepared, Path(tmp) / str(fallback), args.vocab_size, fallback)
            model = spm.SentencePieceProcessor(model_file=str(path))
            for name, lines in sets.items():
                figures = unk_figures(model, lines)
                print(json.dumps({"byte_fallback": fallback, "set": name, **figures}))


if __name__ == "__main__":
    main()
