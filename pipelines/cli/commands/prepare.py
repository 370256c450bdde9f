"""`nmtpipe prepare` on the command line: flags (after fairseq-preprocess) → PrepareConfig."""

from __future__ import annotations

import argparse
import textwrap
from importlib import resources
from typing import Any

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import FILTERS, INPUT, OUTPUT, QUALITY, PrepareConfig
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.quality.registry import KINDS
from nmtpipe.transforms.storage.commit import StepOutcome
from nmtpipe.transforms.text.filters import REASONS

TAKES_BEAM = True  # options it does not know go to Beam (main.py)
DESCRIPTION = """\
Read raw parallel corpora from any fsspec URL, as downloaded: pairs of line-aligned
files by prefix (--trainpref) or by name (--train-pair SRC TGT), plain or
.gz/.bz2/.xz/.zst, members of archives (tar://MEMBER::ARCHIVE, zip://MEMBER::ARCHIVE),
WMT's SGML sets (.sgm), TSV files, and tables (--table: Parquet, JSON Lines, Arrow, TMX;
Hugging Face datasets as hf://datasets/...), in any encoding (found by itself, or
--src-encoding/--tgt-encoding); and write to --output, on Apache Beam:

  {split}-NNNNN-of-NNNNN.parquet   pairs (id, src, tgt, origin, line, score_*), per split
                                   and shard
  counts/{lang|joined}-*.parquet   Tensor2Tensor token counts of the train split
  counts/chars.parquet             character counts (the alphabet)
  rejects/rejects-*.parquet        every rejected line: origin, line, reason, raw bytes
                                   (and, for what the scorers reject, id and scores)
  stats.json                       pairs read/kept, rejects by reason, lengths, scores
  manifest.json                    written last: files, sizes, sha256, config, inputs

Running again with the same inputs and options finds the committed result and stops.
"""
EPILOG = """\
examples:
  nmtpipe prepare --example --output runs/example/prepared
  nmtpipe prepare -s en -t zh --trainpref data/train --validpref data/dev \\
      --output s3://bucket/prepared --num-shards 64
  nmtpipe prepare -s en -t zh --tsv 'data/*.tsv' --tsv-columns 0,1 --output out/ \\
      --runner=FnApiRunner --direct_num_workers=8
  nmtpipe prepare -s en -t zh --output out/ \\
      --train-pair 'tar://cwmt/neu2017/NEU_en.txt::cwmt.tgz' \\
                   'tar://cwmt/neu2017/NEU_cn.txt::cwmt.tgz' \\
      --valid-pair 'tar://dev/newsdev2017-enzh-src.en.sgm::dev.tgz' \\
                   'tar://dev/newsdev2017-enzh-ref.zh.sgm::dev.tgz'
  nmtpipe prepare -s en -t zh --output out/ \\
      --table 'hf://datasets/Helsinki-NLP/opus-100/en-zh/train-*.parquet' \\
      --valid-table hf://datasets/Helsinki-NLP/opus-100/en-zh/validation-00000-of-00001.parquet
"""
EXAMPLE_TRAIN = "tatoeba-cmn"
FILTERS_NOTE = "each counted in stats.json and kept in rejects/ with its reason"
# The scorers as the help and the reference page list them, what each catches and costs.
QUALITY_NOTE = "\n".join(
    [
        "scores beside the kept pairs (score_* columns); a reject keeps its scores and\n"
        "the reason that decided (docs/commands/prepare.md#pair-scores):",
        *(
            textwrap.fill(
                f"{name}: catches {kind.CATCHES}; costs {kind.COSTS}",
                92,
                initial_indent="- ",
                subsequent_indent="  ",
            )
            for name, kind in KINDS.items()
        ),
    ]
)


CONFIG = PrepareConfig
PLAIN = {"example": bool}  # what a workflow section may say besides the config's options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups = flags.add_options(
        parser, CONFIG, INPUT, {FILTERS: FILTERS_NOTE, QUALITY: QUALITY_NOTE}
    )
    groups[INPUT].add_argument(
        "--example",
        action="store_true",
        help=f"use the example corpus bundled with nmtpipe: {EXAMPLE_TRAIN} (en-zh), its "
        "validation and test splits carved from it",
    )
    flags.add_rebuild_flags(groups[OUTPUT])


def make_config(values: dict[str, Any], example: bool = False) -> PrepareConfig:
    """The config of option values; `--example` (`example: true`) fills in the bundled
    corpus where they give none."""
    if example:
        folder = resources.files("nmtpipe.pipelines") / "example"
        values = {
            **values,
            "src_lang": values.get("src_lang") or "en",
            "tgt_lang": values.get("tgt_lang") or "zh",
            "trainpref": values.get("trainpref") or (str(folder / EXAMPLE_TRAIN),),
        }
    if not values.get("src_lang") or not values.get("tgt_lang"):
        raise ConfigError("--src-lang and --tgt-lang are required (or --example)")
    return flags.make(CONFIG, values)


def config_from_args(args: argparse.Namespace) -> PrepareConfig:
    return make_config(flags.given(CONFIG, args), args.example)


def report(outcome: StepOutcome) -> str:
    """The few lines a user reads after a run."""
    s = outcome.stats
    if outcome.cached:
        fingerprint = outcome.manifest["fingerprint"][:12]
        head = f"cached: {outcome.output} already holds this result (fingerprint {fingerprint})"
    else:
        head = f"prepared {outcome.output} in {outcome.seconds:.1f} s on {outcome.runner}"
    splits = "  ".join(f"{k} {v:,}" for k, v in s["splits"].items())
    rejects = "  ".join(f"{r} {s['rejects'][r]:,}" for r in REASONS if s["rejects"][r])
    scored = "  ".join(f"{r} {n:,}" for r, n in s["rejects"].items() if r not in REASONS and n)
    lines = [
        head,
        f"  read     {s['pairs_read']:>10,}",
        f"  kept     {s['pairs_kept']:>10,}   {splits}",
        f"  rejected {s['pairs_rejected']:>10,}   {rejects or '-'}",
        *([f"  by pair scores        {scored}"] if scored else []),
        *_learned(outcome),
        "  inputs         read       kept  encoding",
    ]
    for origin, info in s["inputs"].items():
        found = list(info.get("encoding", {}).values())
        encoding = found[0] if len(set(found)) == 1 else ", ".join(found) or "-"
        lines.append(f"    {info['read']:>12,} {info['kept']:>10,}  {encoding:<16} {origin}")
    return "\n".join(lines)


def _learned(outcome: StepOutcome) -> list[str]:
    """The lines saying what the scores were learned from where it is not simply the
    pairs read: a sample of them, the trusted pairs and the thresholds those set."""
    options = outcome.manifest.get("options", {})
    trusted, sampled = options.get("trusted"), outcome.stats.get("learned_sample")
    if not (trusted or sampled):
        return []
    learned = max(outcome.stats.get("learned", {}).values(), default=0)
    these = "these"
    if sampled:
        these = f"a sample of these (--learn-pairs {options['quality']['learn_pairs']})"
        these += "".join(
            f"; the {column} scores of the other {n:,} matched to the sample's"
            for column, n in outcome.stats.get("matched", {}).items()
        )
    if not trusted:
        return [f"  scores learned from {learned:,} pairs, {these}"]
    origins = ", ".join(t["origin"] for t in trusted["pairs"])
    lines = [f"  scores learned from {learned:,} pairs, {these} and the trusted {origins}"]
    set_ = [
        f"--{option.replace('_', '-')} {value:g}"
        for values in outcome.stats.get("calibrated", {}).values()
        for option, value in values.items()
    ]
    if set_:
        lines.append(f"  thresholds keeping {trusted['keep']:.1%} of them: {'  '.join(set_)}")
    return lines


def shown(outcome: StepOutcome) -> logs.Shown:
    return logs.Shown(logs.outcome_result(outcome), report(outcome))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    outcome = run_prepare(config_from_args(args), beam_args, **logs.step_options(args))
    logs.show(args, shown(outcome))
    return 0
