"""The beam search flags `nmtpipe decode` and `nmtpipe translate` share (fairseq's names)."""

from __future__ import annotations

import argparse

from nmtpipe.pipelines.cli.torch_jobs import add_numbers
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.transforms.errors import ConfigError


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    search = parser.add_argument_group("search")
    numbers = {
        "--beam": (int, 4, "beam size (1: greedy)"),
        "--nbest": (int, 1, "hypotheses kept per sentence"),
        "--alpha": (float, 0.6, "T2T's GNMT length penalty exponent"),
        "--min-len": (int, 0, "shortest translation, in tokens"),
        "--no-repeat-ngram-size": (int, 0, "forbid repeating n-grams of this size (0: off)"),
        "--unk-penalty": (float, 0.0, "subtracted from <unk>'s score"),
    }
    add_numbers(search, numbers)
    search.add_argument(
        "--lenpen", type=float, help="fairseq's length penalty and stopping rule (default: T2T's)"
    )
    search.add_argument(
        "--max-len-a", type=float, help="longest output a*src_len+b (default: T2T 1, fairseq 0)"
    )
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
