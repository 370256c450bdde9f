"""`nmtpipe rethreshold SOURCE --output OUT --lexical-min S ...`: a prepared dataset
judged again by other thresholds of its learned scorers, without the corpus."""

from __future__ import annotations

import argparse
from typing import Any

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.rethreshold import run_rethreshold, thresholds_of
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import options
from nmtpipe.transforms.quality.models import dcce
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

With --dcce-scores (the folder `nmtpipe score` wrote for this dataset) and --dcce-min,
the train pairs whose model score (dual conditional cross-entropy) is below it are
rejected too, as `dcce`, their scores beside them; the two models' checkpoints go into
the new dataset's manifest.
"""
EPILOG = """\
examples:
  nmtpipe report runs/example/prepared        # each score's histogram and proposal
  nmtpipe rethreshold runs/example/prepared --output runs/strict/prepared \\
      --lexical-min 0.5 --length-max-deviation 3
  nmtpipe rethreshold runs/example/prepared --output runs/dcce/prepared \\
      --dcce-scores runs/example/dcce --dcce-min 0.02
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
    model = parser.add_argument_group("model score (nmtpipe score)")
    model.add_argument(
        "--dcce-scores", metavar="URL", help="the scores nmtpipe score wrote for SOURCE"
    )
    model.add_argument(
        "--dcce-min",
        type=float,
        metavar="X",
        help="reject train pairs whose dcce is below X (in (0, 1]; higher is better)",
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
    reasons = {dcce.NAME}
    for kind in KINDS.values():
        reasons |= set(getattr(kind, "REASONS", ())) | {getattr(kind, "REASON", "")}
    return [r for r in stats["rejects"] if r in reasons and stats["rejects"][r]]


def dcce_of(args: argparse.Namespace) -> tuple[str, float] | None:
    """(--dcce-scores, --dcce-min), given together or not at all."""
    if (args.dcce_scores is None) != (args.dcce_min is None):
        raise ConfigError("--dcce-scores and --dcce-min go together")
    return None if args.dcce_scores is None else (args.dcce_scores, args.dcce_min)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    outcome = run_rethreshold(
        args.source,
        args.output,
        changes_of(args),
        beam_args,
        dcce_of(args),
        **logs.step_options(args),
    )
    logs.show(args, logs.Shown(logs.outcome_result(outcome), report(outcome, args.source)))
    return 0
