"""The generated corpora the benchmarks run on, made once and kept in benchmarks/.work.

- `longtail` (the default, `make_long_tail_corpus.py`): its distinct tokens grow as real
  text's do (Heaps' law fitted on the bundled NTREX-128 news and Tatoeba sides:
  `heaps.py`, benchmarks/RESULTS.md);
- `recombined` (`make_corpus.py`): recombined Tatoeba pairs, whose vocabulary saturates
  (about 6k distinct English tokens at any size): the case every result before
  2026-11-27 was measured on.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".work"
KINDS = ("longtail", "recombined")
_PREFIX = {"longtail": "longtail", "recombined": "corpus"}  # file names of earlier runs


def _generator(kind: str) -> Callable[..., None]:
    if kind == "longtail":
        from make_long_tail_corpus import generate
    else:
        from make_corpus import generate
    return generate


def corpus(pairs: int, kind: str = "longtail", seed: int = 0) -> Path:
    """The file prefix (`PREFIX.en`, `PREFIX.zh`) of a generated corpus."""
    prefix = WORK / f"{_PREFIX[kind]}-{pairs}" if seed == 0 else WORK / f"{kind}-{pairs}-s{seed}"
    if not Path(f"{prefix}.zh").exists():
        WORK.mkdir(exist_ok=True)
        _generator(kind)(pairs, str(prefix), seed=seed)
    return prefix


def generate(kind: str, pairs: int, prefix: str, seed: int) -> None:
    """A corpus of `kind` written at `prefix` (for benchmarks that lay out files)."""
    _generator(kind)(pairs, prefix, seed=seed)


def prepared(pairs: int, kind: str = "longtail") -> Path:
    """The generated corpus prepared with the defaults (nmtpipe's cache makes reruns
    free; a cached output from other code or options is replaced)."""
    out = WORK / f"prepared-{kind}-{pairs}"
    cmd = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh",
           "--trainpref", str(corpus(pairs, kind)), "--output", str(out)]  # fmt: skip
    if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        subprocess.run([*cmd, "--force"], check=True, stdout=subprocess.DEVNULL)
    return out


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        choices=KINDS,
        default="longtail",
        help="which generated corpus (default longtail; recombined: the saturated one)",
    )
