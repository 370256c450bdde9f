"""The `nmtpipe` command: subcommands, Beam option pass-through, one-line errors.

Each subcommand module offers `add_arguments(parser)` and `run(args, beam_args) -> int`,
and says `TAKES_BEAM = True` if it runs Beam: anything such a command does not know is
handed to Beam as a pipeline option (and rejected, with the nearest option, if Beam does
not know it either). ARCHITECTURE.md's "Command-line conventions" lists the rest.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import signal
import sys
from types import FrameType, ModuleType
from typing import Any, NoReturn

from nmtpipe import __version__
from nmtpipe.pipelines.cli import display, logs
from nmtpipe.pipelines.usage import unknown_options
from nmtpipe.transforms.errors import Terminated, comes_of

# name: (module, one line for `nmtpipe --help`). A module is imported only when its
# command runs or its help is asked for: each imports Beam, torch or matplotlib.
COMMANDS = {
    "prepare": (
        "nmtpipe.pipelines.cli.commands.prepare",
        "raw corpora -> clean, deduplicated, split, sharded Parquet + token counts",
    ),
    "rethreshold": (
        "nmtpipe.pipelines.cli.commands.quality.rethreshold",
        "a prepared dataset -> the same judged by other score thresholds, without the corpus",
    ),
    "vocab": (
        "nmtpipe.pipelines.cli.commands.vocab",
        "token counts -> Tensor2Tensor subwords, SentencePiece or HF tokenizers, + fairseq dicts",
    ),
    "encode": (
        "nmtpipe.pipelines.cli.commands.encode",
        "prepared pairs + vocabulary -> Arrow and fairseq mmap shards of ids",
    ),
    "train": (
        "nmtpipe.pipelines.cli.commands.train",
        "encoded shards -> a Transformer or GRU model, with torchrun/DDP, resumable",
    ),
    "decode": (
        "nmtpipe.pipelines.cli.commands.decode",
        "a checkpoint + a split or text -> translations (beam search), BLEU/chrF",
    ),
    "score": (
        "nmtpipe.pipelines.cli.commands.quality.score",
        "a prepared dataset + forward and backward models -> each train pair's DCCE score",
    ),
    "average": (
        "nmtpipe.pipelines.cli.commands.average",
        "several checkpoints -> one, their weights averaged",
    ),
    "translate": (
        "nmtpipe.pipelines.cli.commands.translate",
        "raw sentences on stdin -> translations on stdout, streamed (like fairseq-interactive)",
    ),
    "export": (
        "nmtpipe.pipelines.cli.commands.export",
        "a checkpoint -> Hugging Face Transformers (MarianMT) or CTranslate2",
    ),
    "run": (
        "nmtpipe.pipelines.cli.commands.run",
        "all of the above from one YAML config, skipping what is already built",
    ),
    "refresh": (
        "nmtpipe.pipelines.cli.commands.refresh",
        "publish a new dataset version from new or changed inputs, incrementally",
    ),
    "report": (
        "nmtpipe.pipelines.cli.commands.report",
        "a self-contained HTML page about a prepared or encoded dataset or a version",
    ),
}

# The commands that run Beam pipelines: only they pay for Beam's start (imported lean,
# its graph introspection memoised, the heap frozen at the exit); the others never
# import Beam (pyproject.toml's import contracts name them; a test runs each).
RUNS_BEAM = frozenset({"prepare", "rethreshold", "vocab", "encode", "run", "refresh"})

DESCRIPTION = """\
Turn raw parallel corpora into training-ready data, at any scale, on Apache Beam.

prepare, rethreshold, vocab, encode and refresh also take Beam's pipeline options (--runner,
--direct_num_workers, --direct_running_mode, Dataflow's --project/--region/
--temp_location, Flink's --flink_master, ...); `nmtpipe STEP --help-beam` lists them.

Everything meant for people (progress, a command's report, errors) goes to stderr. A
command's result goes to stdout as one JSON document when stdout is a pipe or a file,
or with --json (translate's stdout is its translations).
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Every command's help: descriptions and examples as written, and every option's
    default as argparse knows it (a value, not a hand-written string that can drift);
    options whose default is "unset" (None, or off for a switch) say what that means in
    their own help."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        unset = action.default is None or action.default is False or action.default == []
        if unset or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


class _CommandParser(argparse.ArgumentParser):
    """A command's parser, whose usage errors are one line, as every error is (its usage
    is a screen long: `--help` shows it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, with the options of `command` only (of all of them
    when None), so that a command's start imports no other command's module.
    Conventions every command gets here, for free: HelpFormatter, no abbreviations, the
    general flags (--verbose, --quiet) and, for the commands that run Beam
    (`TAKES_BEAM`), --help-beam."""
    parser = argparse.ArgumentParser(
        prog="nmtpipe",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"nmtpipe {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="STEP", required=True, parser_class=_CommandParser
    )
    for name, (_, summary) in COMMANDS.items():
        if command is not None and name != command:
            sub.add_parser(name, help=summary)
            continue
        module = command_module(name)
        p = sub.add_parser(
            name,
            help=summary,
            description=module.DESCRIPTION,
            epilog=module.EPILOG,
            formatter_class=HelpFormatter,
            allow_abbrev=False,
        )
        module.add_arguments(p)
        common = p.add_argument_group("general")
        shown = common.add_mutually_exclusive_group()
        shown.add_argument(
            "--verbose", "-v", action="store_true", help="log everything and show tracebacks"
        )
        shown.add_argument(
            "--quiet", "-q", action="store_true", help="no progress display: results and errors"
        )
        if not getattr(module, "STREAMS", False):
            common.add_argument(
                "--json",
                action="store_true",
                help="print the JSON result on stdout on a terminal too (a pipe or a file always "
                "gets it)",
            )
        if takes_beam(name):
            common.add_argument(
                "--help-beam", action="store_true", help="list every Beam pipeline option and exit"
            )
    return parser


def overview() -> str:
    """What bare `nmtpipe` says: every command with its summary, as `git` lists its own."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
    usage = "usage: nmtpipe STEP [options]"
    more = "`nmtpipe STEP --help` lists a command's options; `nmtpipe --help` says more."
    return "\n".join([usage, "", "commands:", *lines, "", more])


def command_module(command: str) -> ModuleType:
    """The module of `nmtpipe {command}`, imported on first use."""
    return importlib.import_module(COMMANDS[command][0])


def takes_beam(command: str) -> bool:
    """Whether `nmtpipe {command}` passes the options it does not know to Beam."""
    return getattr(command_module(command), "TAKES_BEAM", False)


def _option_strings(parser: argparse.ArgumentParser, command: str) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [flag for action in sub.choices[command]._actions for flag in action.option_strings]


def show_step(command: str | None, outcome: Any) -> dict[str, Any]:
    """Show a step's outcome as its command reports it (a step of no command: where its
    output is), on stderr; its result, for the command that ran it (`run`, `refresh`)
    to put in its own."""
    if command is None:
        head = logs.outcome_head(outcome, "result", "made")
        shown = logs.Shown(logs.outcome_result(outcome), head)
    else:
        shown = command_module(command).shown(outcome)
    logs.tell(shown.report)
    return shown.result


def _start_beam() -> None:
    """Beam's start in this process, once logging is set up and before any Beam graph
    module: malloc kept to two arenas (`malloc_arenas.py`), Beam imported without the
    integrations nmtpipe never uses, the graph introspection it repeats memoised, and the
    garbage collector frozen at the exit (`exit_freeze.py`; the workers freeze through
    their pipeline options and inherit the arenas' limit). Local worker processes, and
    the fork server they come from, start with the first run that needs them
    (`options.placement`)."""
    from nmtpipe.pipelines.beam import exit_freeze, malloc_arenas
    from nmtpipe.pipelines.beam.lean_import import import_beam

    malloc_arenas.limit_arenas()  # first: the fork server, hence the workers, inherit it
    import_beam()
    from nmtpipe.pipelines.beam import graph_memo  # (imports Beam)

    graph_memo.install()
    exit_freeze.freeze_at_exit()


def main(argv: list[str] | None = None) -> int:
    """The command line's one entry point. Conventions: unknown options are errors with
    the nearest known option (Beam's too, for the commands that take Beam options);
    a result goes to stdout as one JSON document (`logs.result`), everything for people
    (progress, reports, errors) to stderr; errors are one line (tracebacks with
    --verbose). Without a command, the commands (exit status 2)."""
    argv = sys.argv[1:] if argv is None else argv
    verbose = "-v" in argv or "--verbose" in argv
    logs.configure(verbose=verbose)
    display.install(quiet="-q" in argv or "--quiet" in argv)
    # The command is the first word (the only options before it are --help and --version).
    named = next((word for word in argv if not word.startswith("-")), None)
    if named is None and not {"-h", "--help", "--version"} & set(argv):
        print(overview(), file=sys.stderr)
        return 2
    if named not in COMMANDS or named in RUNS_BEAM:  # (every command's help loads them all)
        _start_beam()
    parser = build_parser(named if named in COMMANDS else None)
    args, rest = parser.parse_known_args(argv)
    module = command_module(args.command)
    try:
        ours = _option_strings(parser, args.command)
        if not takes_beam(args.command):
            error = unknown_options(rest, ours, f"see nmtpipe {args.command} --help")
            if error is not None:
                raise error
        else:
            from nmtpipe.pipelines.beam import options

            if args.help_beam:
                options.beam_parser().print_help()
                return 0
            options.check_beam_args(rest, ours)
        return module.run(args, rest)
    except KeyboardInterrupt as exc:  # (a Beam run's says what it left undone)
        said = str(exc) or "interrupted; nothing was committed"
        if comes_of(exc, Terminated):
            said = said.replace("interrupted", "terminated (SIGTERM)", 1)
            print(f"nmtpipe {args.command}: {said}", file=sys.stderr)
            return logs.TERMINATED
        print(f"nmtpipe {args.command}: {said}", file=sys.stderr)
        return logs.INTERRUPTED
    except Exception as exc:
        line, code = logs.error_line(args.command, exc, args.verbose)
        print(line, file=sys.stderr)
        return code


def entry(argv: list[str] | None = None) -> int:
    """`nmtpipe` as a process of its own (the console script, `python -m nmtpipe`):
    `main`, then `gc.freeze()`. The process ends next, and without the freeze the
    interpreter's last collection walks every object the run left: 0.1-0.3 s after a
    prepare or a refresh (benchmarks/RESULTS.md). Nothing with a finalizer depends on
    that collection: files are closed and outputs committed by then."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return main(argv)
    finally:
        gc.freeze()


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C: what the command began is removed, one line says so."""
    raise Terminated


if __name__ == "__main__":
    sys.exit(entry())
