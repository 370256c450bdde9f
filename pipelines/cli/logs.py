"""What nmtpipe's command line shows of Beam's logging and of its worker processes, of a
command's result and report (`show`), and of its failure (`error_line`).

By default a run shows nmtpipe's own progress and, on failure, one line. Beam logs at
length (every worker failure comes with two tracebacks), its local worker processes
write their logs straight to the terminal (`pipelines/beam/options.py` silences them),
and some of Beam's records go to the root logger (a remote engine's job messages, a
warning about a BigQuery client nmtpipe never uses). `--verbose` shows all of it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import traceback
from typing import Any

from nmtpipe.transforms.errors import ConfigError, Interrupted, find_user_error
from nmtpipe.transforms.progress import note


class _DropBeamOnRoot(logging.Filter):
    """Beam's records logged on the root logger rather than its own: the portable
    runner echoes a remote engine's job messages there (its error then comes twice, the
    second time as nmtpipe's one line), and an import warns of a BigQuery client."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}apache_beam{os.sep}" not in record.pathname


def progress(message: str) -> None:
    """A progress line for the user, on stderr (none with --quiet)."""
    note(message)


@dataclasses.dataclass(frozen=True)
class Shown:
    """What a command shows of what it did: `result` for programs, `report` for people."""

    result: dict[str, Any]
    report: str


def show(args: argparse.Namespace, shown: Shown) -> None:
    """A command's report on stderr, then its result on stdout (`result`)."""
    tell(shown.report)
    result(args, shown.result)


def tell(report: str) -> None:
    """A report for people, on stderr (with progress and errors)."""
    print(report, file=sys.stderr, flush=True)


def result(args: argparse.Namespace, found: dict[str, Any]) -> None:
    """The result of `nmtpipe {args.command}` on stdout, one JSON document on one line,
    `{"command": ..., "result": ...}`, when a program reads it: stdout is a pipe or a
    file, or `--json` asks. A terminal gets none: its person has read the report."""
    if args.json or not sys.stdout.isatty():
        document = {"command": args.command, "result": found}
        print(json.dumps(document, ensure_ascii=False, default=str), flush=True)


# The exit status of a command the user interrupted (Ctrl-C), as shells give 128 + SIGINT;
# and of one told to end (SIGTERM: 128 + 15).
INTERRUPTED = 130
TERMINATED = 143


def error_line(command: str, exc: BaseException, verbose: bool) -> tuple[str, int]:
    """The one line a user sees when `nmtpipe {command}` fails with `exc`, and the exit
    code: 2 for a usage error, 130 for an interruption (saying what was kept), 1
    otherwise. With `verbose` the traceback is printed first; without, an unexpected
    error says how to see it."""
    if verbose:
        traceback.print_exception(exc)
    error = find_user_error(exc)
    if error is None:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else ""
        hint = "" if verbose else " (run with --verbose for the traceback)"
        return f"nmtpipe: internal error: {type(exc).__name__}: {first}{hint}", 1
    if isinstance(error, Interrupted):
        return f"nmtpipe {command}: {error}", INTERRUPTED
    return f"nmtpipe {command}: error: {error}", 2 if isinstance(error, ConfigError) else 1


def outcome_result(outcome: Any, **extra: Any) -> dict[str, Any]:
    """The JSON result of a Beam step's outcome: its fields but the manifest (which is
    in the output folder), and the fingerprint that identifies the output."""
    fields = {k: v for k, v in dataclasses.asdict(outcome).items() if k != "manifest"}
    return {**fields, "fingerprint": outcome.manifest["fingerprint"], **extra}


def outcome_head(outcome: Any, what: str, done: str) -> str:
    """A Beam step's first report line: `cached: OUT already holds this WHAT`, or what
    it `done` (`encoded into OUT in 3.2 s on FnApiRunner (...)`)."""
    if outcome.cached:
        return f"cached: {outcome.output} already holds this {what}"
    return f"{done} {outcome.output} in {outcome.seconds:.1f} s"


def step_options(args: argparse.Namespace) -> dict[str, Any]:
    """What every step takes from the general flags: --force, --replace, how much to show."""
    return {
        "force": args.force,
        "replace": args.replace,
        "log": progress,
        "quiet": not args.verbose,
    }


def configure(verbose: bool) -> None:
    """Set up logging; call before Beam is imported, so its import-time warning is filtered."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    root = logging.getLogger()
    if not verbose and not any(isinstance(f, _DropBeamOnRoot) for f in root.filters):
        root.addFilter(_DropBeamOnRoot())
    logging.getLogger("apache_beam").setLevel(logging.INFO if verbose else logging.CRITICAL)
