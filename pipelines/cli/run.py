"""`nmtpipe run` on the command line: a workflow config → every step, cached."""

from __future__ import annotations

import argparse
import sys

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.config_file import example_config, load_config
from nmtpipe.pipelines.cli.main import show_step
from nmtpipe.pipelines.workflow.run import run_workflow, summary_table, write_run_report
from nmtpipe.pipelines.workflow.run_config import STEPS
from nmtpipe.transforms.errors import ConfigError, error_line

SUMMARY = "run the whole chain from a YAML config, skipping what is already built"
DESCRIPTION = """\
Run prepare → vocab → encode → train → decode from one YAML config. Each step's section
holds the options of its command (`nmtpipe STEP --help`, with underscores); the
workflow connects the steps under `root` ({root}/prepared, vocab, encoded, checkpoints,
decoded). A step whose result is already there with the same inputs and options is
reported as cached and not run again; a changed option runs that step and those after
it. Ends with a table of what each step did and the path of the dataset's report
(report.html beside the encoded data, see `nmtpipe report`).
"""
EPILOG = """\
examples:
  nmtpipe run --example
  nmtpipe run corpus.yaml --until encode
  nmtpipe run corpus.yaml --from train
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", metavar="CONFIG", help="a workflow config (YAML)")
    parser.add_argument("--example", action="store_true", help="the bundled example config")
    parser.add_argument("--from", dest="first", choices=STEPS, default=STEPS[0])
    parser.add_argument("--until", dest="last", choices=STEPS, default=STEPS[-1])


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise ConfigError(f"unknown option(s): {' '.join(beam_args)}; Beam options go in beam:")
    if bool(args.config) == args.example:
        raise ConfigError("give a CONFIG file or --example")
    if STEPS.index(args.first) > STEPS.index(args.last):
        raise ConfigError(f"--from {args.first} comes after --until {args.last}")
    config = load_config(example_config() if args.example else args.config)
    results = run_workflow(
        config, args.first, args.last, logs.progress, show_step, quiet=not args.verbose
    )
    print(summary_table(results), flush=True)
    report = write_run_report(config)
    if report is not None:
        print(f"report: {report}", flush=True)
    failed = results[-1]
    if failed.error is not None:
        line, code = error_line(failed.step, failed.error, args.verbose)
        print(line, file=sys.stderr)
        return code
    return 0
