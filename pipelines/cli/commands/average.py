"""`nmtpipe average` on the command line: average checkpoints' weights into one."""

from __future__ import annotations

import argparse

from nmtpipe.pipelines.cli import logs
from nmtpipe.transforms.errors import ConfigError

DESCRIPTION = """\
Average the weights of several checkpoints into one (fairseq's average_checkpoints.py,
T2T's avg_checkpoints): the last N numbered checkpoints of a --save-dir
(checkpoint{epoch}_{update}.pt, by update), or the --checkpoints given. The result,
checkpoint_avg.pt by default, is for decoding; training does not resume from it.
`nmtpipe train --average-last N` does the same at the end of a run.
"""
EPILOG = """\
examples:
  nmtpipe average --save-dir runs/checkpoints --last 5
  nmtpipe average --checkpoints a.pt b.pt c.pt --output s3://bucket/avg.pt
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    main = parser.add_argument_group("averaging")
    main.add_argument("--save-dir", metavar="URL", help="a run's --save-dir")
    main.add_argument("--last", type=int, default=5, metavar="N",
                      help="how many of its newest numbered checkpoints")  # fmt: skip
    main.add_argument("--checkpoints", nargs="+", metavar="URL", help="these checkpoints instead")
    main.add_argument(
        "--output", metavar="URL", help="where it goes (default: SAVE_DIR/checkpoint_avg.pt)"
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    # torch only here: every command's parser is built from this module, and importing
    # torch would cost each of them seconds.
    from nmtpipe.trainers.runtime import checkpoint
    from nmtpipe.trainers.train.average import average, write_average

    if beam_args:
        raise ConfigError(f"unknown option(s): {' '.join(beam_args)}")
    if bool(args.save_dir) == bool(args.checkpoints):
        raise ConfigError("give --save-dir (with --last N) or --checkpoints")
    if args.checkpoints:
        if not args.output:
            raise ConfigError("--checkpoints needs --output")
        out, urls = args.output, args.checkpoints
        checkpoint.save(out, average(urls))
    else:
        if args.last < 1:
            raise ConfigError("--last must be at least 1")
        out, urls = write_average(args.save_dir, args.last, args.output)
    report = f"averaged {len(urls)} checkpoint(s) into {out}: " + ", ".join(urls)
    logs.show(args, logs.Shown({"output": out, "averaged": list(urls)}, report))
    return 0
