"""`nmtpipe run` on the command line: a workflow config → every step, cached."""

from __future__ import annotations

import argparse
import sys

from pipelines import logs
from pipelines.workflow import STEPS, example_config, load_config, run_workflow, summary_table
from transforms.errors import ConfigError

SUMMARY = "run the whole chain from a YAML config, skipping what is already built"
DESCRIPTION = """\
Run prepare → vocab → encode → train → decode from one YAML config. Each step's section
holds the options of its command (`nmtpipe STEP --help`, with underscores); the
workflow connects the steps under `root` ({root}/prepared, vocab, encoded, checkpoints,
decoded). A step whose result is already there with the same inputs and options is
reported as cached and not run again; a changed option runs that step and those after
it. Ends with a table of what each step did.
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
    from pipelines.cli import main

    def run_step(argv: list[str]) -> int:
        return main([*argv, "--verbose"] if args.verbose else argv)

    results = run_workflow(config, args.first, args.last, run_step, logs.progress)
    print(summary_table(results), flush=True)
    if any(r.status == "failed" for r in results):
        print(f"nmtpipe run: {results[-1].step} failed (see above)", file=sys.stderr)
        return 1
    return 0
