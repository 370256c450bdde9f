"""The command line every corpus generator shares (`make_corpus.py`,
`make_long_tail_corpus.py`): `--pairs N --out PREFIX [--seed S]`. A module of its own
so that the generators and `corpora.py`, which runs them, import one way only."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def command_line(generate: Callable[..., None], doc: str) -> None:
    """Parse the command line and run `generate(pairs, prefix, seed)`."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument(
        "--out", required=True, help="output prefix; writes PREFIX.en and PREFIX.zh"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    generate(args.pairs, args.out, args.seed)
