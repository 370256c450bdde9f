"""`nmtpipe decode` on the command line: fairseq-generate's flags → DecodeConfig, torchrun."""

from __future__ import annotations

import argparse

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.cli.torch_jobs import (
    add_nproc,
    run_torch_job,
    shown_step,
    with_checkpoint_file,
)
from nmtpipe.trainers.generate.decode_config import JOB, DecodeConfig
from nmtpipe.transforms.storage.commit import StepOutcome

DESCRIPTION = """\
Translate with a trained checkpoint: a split of an encoded dataset (--data, default the
one the model was trained on; --split, default test) or raw text files (--input, one
sentence per line, normalised and encoded as the training data was). Beam search is
batched over sentences and beams on the incremental decoder, spread over the ranks of
a torchrun job (--nproc N on one machine). Scores BLEU and chrF with sacrebleu against
the split's targets or --reference files.

Writes to --output (any fsspec URL): hypotheses.txt (the best translation per input
line), nbest.jsonl (n-best lists with scores), scores.json (scores and speed; last).

Integrity: the shards of --data are checked against their manifest's sha256 once per
file and machine when opened (not on every read), the checkpoint against its own
digest, the prepared texts page by page (Parquet CRCs) as they are read.

Search: Tensor2Tensor's by default (--alpha, GNMT length penalty, T2T's stopping
rule); --lenpen switches to fairseq's (score / length^lenpen, stop at --beam finished).
"""
EPILOG = """\
examples:
  nmtpipe decode --checkpoint runs/ckpt/checkpoint_best.pt --output runs/decoded
  nmtpipe decode --checkpoint s3://b/ckpt/checkpoint_best.pt --input news.en \\
      --reference news.zh --output s3://b/news-decoded --beam 5 --lenpen 1.0 --nproc 8
"""


CONFIG = DecodeConfig
PLAIN = {"nproc": int}  # what a workflow section may say besides the config's options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_nproc(flags.add_options(parser, CONFIG, "input and output")[JOB])


# What the counts of inputs and translations out of the ordinary mean, said beside them.
COUNTED = {
    "truncated": "longer than --max-source-positions: cut to it",
    "skipped": "longer than --max-source-positions: an empty line",
    "unfinished": "no EOS within --max-len-a * source length + --max-len-b tokens: cut there",
}


def report(summary: dict) -> str:
    done = (
        f"translated {summary['sentences']:,} sentences in {summary['seconds']} s "
        f"({summary['sentences_per_s']:,.1f} sentences/s, "
        f"{summary['target_tokens_per_s']:,.0f} target tokens/s, {summary['world']} rank(s))"
    )
    notes = [f"{summary[k]:,} {k} ({why})" for k, why in COUNTED.items() if summary[k]]
    if notes:
        done += "; " + ", ".join(notes)
    lines = [done]
    for name in ("bleu", "chrf"):
        if name in summary:
            lines.append(f"{summary[f'{name}_line']}  ({summary[f'{name}_signature']})")
    return "\n".join(lines)


def shown(outcome: StepOutcome) -> logs.Shown:
    return shown_step(outcome, report, "translation")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    return run_torch_job(with_checkpoint_file(flags.from_args(CONFIG, args)), args, report)
