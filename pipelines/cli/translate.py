"""`nmtpipe translate` on the command line: stdin (or files) → translations on stdout."""

from __future__ import annotations

import argparse
import json
import sys

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.search_flags import add_search_arguments, search_from_args
from nmtpipe.trainers.loop.translate_config import ENGINES, TranslateConfig
from nmtpipe.transforms.errors import ConfigError

DESCRIPTION = """\
Translate raw sentences, one per line, from stdin (or --input files) to stdout, in input
order. Lines are normalised and encoded as the training data was, batched by tokens as
they are read (a big file streams through in bounded memory; a line typed at a terminal
is answered at once), and the translations are detokenised. With --nbest N > 1 each
input gives N lines `INDEX<TAB>SCORE<TAB>TEXT`, best first.

Engines: nmtpipe's beam search on --checkpoint (T2T's rules by default, --lenpen for
fairseq's), or --engine ctranslate2 --model DIR, a `nmtpipe export --format ctranslate2`
folder (fairseq's rules: give --lenpen).
"""
EPILOG = """\
examples:
  echo "How are you?" | nmtpipe translate --checkpoint runs/ckpt/checkpoint_best.pt
  nmtpipe translate --checkpoint runs/ckpt/checkpoint_best.pt --input news.en --beam 5 > news.zh
  nmtpipe translate --engine ctranslate2 --model runs/ct2 --lenpen 1.0 < news.en > news.zh
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    io = parser.add_argument_group("model and input")
    io.add_argument("--checkpoint", metavar="URL", help="a checkpoint of nmtpipe train")
    io.add_argument("--engine", choices=ENGINES, default="nmtpipe", help="what translates")
    io.add_argument("--model", metavar="DIR", help="a CTranslate2 export (--engine ctranslate2)")
    io.add_argument("--input", action="append", default=[], metavar="FILE",
                    help="raw text files instead of stdin (repeatable)")  # fmt: skip
    io.add_argument("--data", metavar="URL", help="the encoded data")
    add_search_arguments(parser)
    job = parser.add_argument_group("job")
    job.add_argument("--max-tokens", type=int, default=4096, help="source tokens per batch")
    job.add_argument("--buffer-size", type=int, default=1000,
                     help="sentences read ahead at most")  # fmt: skip
    job.add_argument("--max-source-positions", type=int, default=1024,
                     help="longer inputs are truncated")  # fmt: skip
    job.add_argument("--threads", type=int, default=0, help="CPU threads; 0: every core")


def config_from_args(args: argparse.Namespace) -> TranslateConfig:
    names = ["checkpoint", "model", "engine", "data", "max_tokens", "buffer_size",
             "max_source_positions", "threads"]  # fmt: skip
    return TranslateConfig(inputs=tuple(args.input), search=search_from_args(args),
                           **{name: getattr(args, name) for name in names})  # fmt: skip


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise ConfigError(f"unknown option(s): {' '.join(beam_args)}")
    config = config_from_args(args)
    from nmtpipe.trainers.loop.translate import translate  # torch: only now

    done = translate(config, sys.stdout, logs.progress if args.verbose else lambda _: None)
    print(json.dumps({"translated": done}), file=sys.stderr, flush=True)
    return 0
