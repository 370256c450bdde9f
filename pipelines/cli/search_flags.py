"""The beam search flags `nmtpipe decode` and `nmtpipe translate` share (fairseq's names)."""

from __future__ import annotations

import argparse

from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.transforms.errors import ConfigError


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    search = parser.add_argument_group("search")
    numbers = {
        "--beam": (int, 4), "--nbest": (int, 1), "--alpha": (float, 0.6),
        "--min-len": (int, 0), "--no-repeat-ngram-size": (int, 0), "--unk-penalty": (float, 0.0),
    }  # fmt: skip
    for flag, (kind, default) in numbers.items():
        search.add_argument(flag, type=kind, default=default, help=f"default: {default}")
    search.add_argument("--lenpen", type=float, help="fairseq's length penalty and stopping")
    search.add_argument("--max-len-a", type=float, help="max length a*src_len+b (T2T 1, fs 0)")
    search.add_argument("--max-len-b", type=int, help="(default: T2T 50, fairseq 200)")


def search_from_args(args: argparse.Namespace) -> SearchConfig:
    try:
        return SearchConfig(
            beam=args.beam, nbest=args.nbest, alpha=args.alpha, lenpen=args.lenpen,
            max_len_a=args.max_len_a, max_len_b=args.max_len_b, min_len=args.min_len,
            no_repeat_ngram_size=args.no_repeat_ngram_size, unk_penalty=args.unk_penalty,
        )  # fmt: skip
    except ValueError as e:
        raise ConfigError(str(e)) from None
