"""`nmtpipe report OUTPUT`: the dataset report, one self-contained HTML page."""

from __future__ import annotations

import argparse

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.workflow.report import REPORT, write_report
from nmtpipe.transforms.errors import ConfigError

DESCRIPTION = f"""\
Write {REPORT}: pairs read and kept per input, rejects by reason with examples, length
histograms, the length-ratio distribution with the filter's limit, split sizes, and for
encoded data tokens per sentence, <unk> rate, subword fertility and the most frequent
pieces. Plots are inline SVG: the page opens without a network.
"""
EPILOG = """\
examples:
  nmtpipe report runs/example/prepared
  nmtpipe report runs/example/encoded --output /tmp/report.html
  nmtpipe report gs://bucket/en-zh/versions/LATEST
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", metavar="OUTPUT", help="a prepare or encode output, or a refresh version"
    )
    parser.add_argument(
        "--output", metavar="URL", help=f"where to write the page (default: OUTPUT/{REPORT})"
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise ConfigError(f"unknown option(s): {' '.join(beam_args)}")
    page = write_report(args.target, args.output)
    logs.show(args, logs.Shown({"report": page}, f"report: {page}"))
    return 0
