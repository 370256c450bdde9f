"""`nmtpipe rethreshold SOURCE --output OUT --lexical-min S ...`: a prepared dataset
judged again by other thresholds of its learned scorers, without the corpus."""

from __future__ import annotations

import argparse
from typing import Any

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.rethreshold import run_rethreshold, thresholds_of
from nmtpipe.transforms.options import options
from nmtpipe.transforms.quality.registry import KINDS
from nmtpipe.transforms.storage.commit import StepOutcome

TAKES_BEAM = True  # options it does not know go to Beam (main.py)
DESCRIPTION = """\
Judge a prepared dataset again with other thresholds of its learned scorers (lexical,
length, fluency: the score columns beside its pairs), into a new output, from its
shards, rejects and token counts alone: the raw corpora are not read. The result is the
dataset `nmtpipe prepare` with those thresholds would commit, byte for byte, with the
fingerprint it would have; only the pairs whose fate changes are tokenized again.
Options that change what a scorer learns need the corpus: run prepare again.
"""
EPILOG = """\
examples:
  nmtpipe report runs/example/prepared        # each score's histogram and proposal
  nmtpipe rethreshold runs/example/prepared --output runs/strict/prepared \\
      --lexical-min 0.5 --length-max-deviation 3
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE", help="a prepared dataset (prepare's --output)")
    parser.add_argument("--output", metavar="URL", required=True, help="where to write the new one")
    group = parser.add_argument_group("thresholds (default: the source's)")
    owners = thresholds_of()
    for option in options(PrepareConfig):  # the flags prepare gives the same options
        if option.name in owners:
            group.add_argument(
                option.flag,
                dest=option.name,
                metavar=option.spec.metavar or option.kind.upper(),
                type=option.parse,
                help=option.spec.help,
            )
    flags.add_rebuild_flags(parser.add_argument_group("output"))


def changes_of(args: argparse.Namespace) -> dict[str, Any]:
    """The thresholds given, by option name."""
    return {
        name: getattr(args, name)
        for name in thresholds_of()
        if getattr(args, name, None) is not None
    }


def report(outcome: StepOutcome, source: str) -> str:
    """The few lines a user reads after a run."""
    s = outcome.stats
    if outcome.cached:
        head = f"cached: {outcome.output} already holds this result"
    else:
        head = f"judged {source} again into {outcome.output} in {outcome.seconds:.1f} s"
    splits = "  ".join(f"{k} {v:,}" for k, v in s["splits"].items())
    scored = "  ".join(f"{r} {s['rejects'].get(r, 0):,}" for r in _scored_reasons(s))
    return "\n".join(
        [
            head,
            f"  kept     {s['pairs_kept']:>10,}   {splits}",
            f"  rejected {s['pairs_rejected']:>10,}   by pair scores: {scored or '-'}",
        ]
    )


def _scored_reasons(stats: dict[str, Any]) -> list[str]:
    """The reasons the pair scorers give (the rules', the learned scores', near-duplicate)."""
    reasons = set()
    for kind in KINDS.values():
        reasons |= set(getattr(kind, "REASONS", ())) | {getattr(kind, "REASON", "")}
    return [r for r in stats["rejects"] if r in reasons and stats["rejects"][r]]


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    outcome = run_rethreshold(
        args.source, args.output, changes_of(args), beam_args, **logs.step_options(args)
    )
    logs.show(args, logs.Shown(logs.outcome_result(outcome), report(outcome, args.source)))
    return 0
