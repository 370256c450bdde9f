"""`nmtpipe score` on the command line: a prepared dataset's train pairs scored by dual
conditional cross-entropy with a forward and a backward model, on torchrun ranks."""

from __future__ import annotations

import argparse
import dataclasses

from nmtpipe.pipelines.cli import flags
from nmtpipe.pipelines.cli.torch_jobs import add_nproc, run_checkpoint, run_torch_job
from nmtpipe.trainers.generate.dcce_config import DcceConfig

DESCRIPTION = """\
Score the train pairs of a prepared dataset by dual conditional cross-entropy
(Junczys-Dowmunt 2018): the per-token cross-entropy of the target given the source by a
forward model, and of the source given the target by a backward model, each trained by
nmtpipe train on a corpus you trust (with vocabularies of their own). A pair that
translates each other is likely both ways, and about equally: dcce = exp(-(|H_fwd -
H_bwd| + (H_fwd + H_bwd) / 2)), in (0, 1], higher is better. The shards are spread over
the ranks of a torchrun job (--nproc N on one machine; a GPU each where there are).

Writes to --output one Parquet file per train shard, named as the shard, row for row
with it (id, h_fwd, h_bwd, dcce), each committed when done, and score_summary.json
(what was scored, with which checkpoints) last. Run again after a failure or Ctrl-C,
it scores only the shards not yet scored. Then `nmtpipe rethreshold --dcce-scores DIR
--dcce-min X` rejects the pairs below X.

The pairs are scored as prepared (normalised by this dataset's prepare options): the
models should have been trained on data prepared the same way.
"""
EPILOG = """\
examples:
  nmtpipe score --prepared runs/crawl/prepared --forward runs/seed-enzh \\
      --backward runs/seed-zhen/checkpoints --output runs/crawl/dcce --nproc 2
  nmtpipe rethreshold runs/crawl/prepared --output runs/crawl/filtered \\
      --dcce-scores runs/crawl/dcce --dcce-min 0.02
"""

CONFIG = DcceConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_nproc(flags.add_options(parser, CONFIG, "input and output")["job"])


def report(summary: dict) -> str:
    reused = f", {summary['shards_reused']} shard(s) scored before" * bool(summary["shards_reused"])
    return (
        f"scored {summary['scored']:,} of {summary['pairs']:,} train pairs in "
        f"{summary['seconds']} s ({summary['pairs_per_s']:,.1f} pairs/s, "
        f"{summary['world']} rank(s){reused})"
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    config = flags.from_args(CONFIG, args)
    config = dataclasses.replace(
        config,
        forward=run_checkpoint(config.forward, "--forward"),
        backward=run_checkpoint(config.backward, "--backward"),
    )
    return run_torch_job(config, args, report)
