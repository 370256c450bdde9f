"""`nmtpipe translate` on the command line: stdin (or files) → translations on stdout."""

from __future__ import annotations

import argparse
import sys

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.cli.torch_jobs import with_checkpoint_file
from nmtpipe.trainers.generate.translate_config import TranslateConfig
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


CONFIG = TranslateConfig
STREAMS = True  # stdout carries its translations, not a JSON result: no --json (main.py)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_options(parser, CONFIG, "model and input")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise ConfigError(f"unknown option(s): {' '.join(beam_args)}")
    config = with_checkpoint_file(flags.from_args(CONFIG, args))
    from nmtpipe.trainers.generate.translate import translate  # torch: only now

    done = translate(config, sys.stdout, logs.progress if args.verbose else lambda _: None)
    logs.tell(f"translated {done['sentences']:,} sentences")
    return 0
