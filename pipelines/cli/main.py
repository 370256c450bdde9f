"""The `nmtpipe` command: subcommands, Beam option pass-through, one-line errors.

Each subcommand module offers `add_arguments(parser)` and `run(args, beam_args) -> int`.
Anything a subcommand does not know is handed to Beam as a pipeline option (and
rejected there if Beam does not know it either).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType
from typing import Any

from nmtpipe import __version__
from nmtpipe.pipelines.cli import logs
from nmtpipe.transforms.errors import error_line

# Imported when the command line is parsed, after logging is set up (they import Beam).
COMMANDS = {
    "prepare": "nmtpipe.pipelines.cli.prepare",
    "vocab": "nmtpipe.pipelines.cli.vocab",
    "encode": "nmtpipe.pipelines.cli.encode",
    "train": "nmtpipe.pipelines.cli.train",
    "decode": "nmtpipe.pipelines.cli.decode",
    "translate": "nmtpipe.pipelines.cli.translate",
    "export": "nmtpipe.pipelines.cli.export",
    "run": "nmtpipe.pipelines.cli.run",
    "refresh": "nmtpipe.pipelines.cli.refresh",
}

DESCRIPTION = """\
Turn raw parallel corpora into training-ready data, at any scale, on Apache Beam.

Steps available in this version:
  prepare   raw corpora -> clean, deduplicated, split, sharded Parquet + token counts
  vocab     token counts -> Tensor2Tensor subwords or SentencePiece, + fairseq dicts
  encode    prepared pairs + vocabulary -> Arrow and fairseq mmap shards of ids
  train     encoded shards -> a Transformer, with torchrun/DDP, resumable
  decode    a checkpoint + a split or text -> translations (beam search), BLEU/chrF
  translate raw sentences on stdin -> translations on stdout, streamed
  export    a checkpoint -> Hugging Face Transformers (MarianMT) or CTranslate2
  run       all of the above from one YAML config, skipping what is already built
  refresh   publish a new dataset version from new or changed inputs, incrementally

Every step also takes Beam's pipeline options (--runner, --direct_num_workers,
--direct_running_mode, Dataflow's --project/--region/--temp_location, Flink's
--flink_master, ...); `nmtpipe STEP --help-beam` lists them all.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nmtpipe",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nmtpipe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="STEP", required=True)
    for name, module in _commands().items():
        p = sub.add_parser(
            name,
            help=module.SUMMARY,
            description=module.DESCRIPTION,
            epilog=module.EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,
        )
        module.add_arguments(p)
        common = p.add_argument_group("general")
        common.add_argument(
            "--verbose", "-v", action="store_true", help="log progress and show tracebacks"
        )
        common.add_argument(
            "--help-beam", action="store_true", help="list every Beam pipeline option and exit"
        )
    return parser


def _commands() -> dict[str, ModuleType]:
    return {name: importlib.import_module(path) for name, path in COMMANDS.items()}


def show_step(step: str, result: Any) -> None:
    """Show what step `step` did as its own command shows it (for `run` and `refresh`)."""
    importlib.import_module(COMMANDS[step]).show(result)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logs.configure(verbose="-v" in argv or "--verbose" in argv)
    from nmtpipe.pipelines.beam import options  # Beam, only now that logging is set up

    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    if args.help_beam:
        options.beam_parser().print_help()
        return 0
    module = _commands()[args.command]
    try:
        return module.run(args, beam_args)
    except KeyboardInterrupt:
        print("nmtpipe: interrupted; nothing was committed", file=sys.stderr)
        return 130
    except Exception as exc:
        line, code = error_line(args.command, exc, args.verbose)
        print(line, file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
