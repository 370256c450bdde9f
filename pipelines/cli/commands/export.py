"""`nmtpipe export` on the command line: a checkpoint → Transformers or CTranslate2."""

from __future__ import annotations

import argparse
from typing import Any

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.cli.torch_jobs import with_checkpoint_file
from nmtpipe.trainers.export.export_config import ExportConfig
from nmtpipe.transforms.errors import ConfigError

DESCRIPTION = """\
Export a trained checkpoint for use without nmtpipe, into --output (any fsspec URL):

  --format hf           a MarianMT folder: AutoModelForSeq2SeqLM and AutoTokenizer load
                        it with no custom code; tokenizer.json encodes raw text as
                        nmtpipe does (normalisation included); generation_config.json,
                        README.md (the model card: data, vocabulary, training, scores)
  --format ctranslate2  a CTranslate2 model (CTranslate2's converter on the above,
                        --quantization int8|int8_float32|float16|float32) with the
                        tokenizer files beside it

Needs `pip install 'nmtpipe[export]'`. Post-norm Transformers trained on a joined
SentencePiece vocabulary are exported; others are refused with the reason.
"""
EPILOG = """\
examples:
  nmtpipe export --checkpoint runs/ckpt/checkpoint_best.pt --format hf --output runs/hf
  nmtpipe export --checkpoint runs/ckpt/checkpoint_best.pt --format ctranslate2 \\
      --quantization int8 --output runs/ct2 --scores runs/decoded/scores.json
"""


CONFIG = ExportConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = flags.add_options(parser, CONFIG, "export")["export"]
    group.add_argument("--force", action="store_true", help="export again even if cached")


def shown(result: dict[str, Any]) -> logs.Shown:
    """The manifest as the command's JSON result, one line for the user on stderr."""
    model = f"{result['format']} model of {result['options']['checkpoint']}"
    if result["cached"]:
        what = f"cached: {result['output']} already holds the {model}"
    else:
        what = f"exported the {model} into {result['output']} in {result['seconds']} s"
    files = ", ".join(f["path"] for f in result["files"])
    return logs.Shown(result, f"{what}: {files}")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise ConfigError(f"unknown option(s): {' '.join(beam_args)}")
    config = with_checkpoint_file(flags.from_args(CONFIG, args))
    try:
        from nmtpipe.trainers.export.export import run_export  # transformers: only here
    except ImportError as e:
        raise ConfigError(f"export needs pip install 'nmtpipe[export]' ({e})") from None
    logs.show(args, shown(run_export(config, force=args.force, log=logs.progress)))
    return 0
