"""`nmtpipe decode` on the command line: fairseq-generate's flags → DecodeConfig, torchrun."""

from __future__ import annotations

import argparse
from typing import Any

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.search_flags import add_search_arguments, search_from_args
from nmtpipe.pipelines.cli.torch_jobs import run_torch_job
from nmtpipe.trainers.loop.decode_config import DecodeConfig
from nmtpipe.transforms.errors import ConfigError

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    io = parser.add_argument_group("input and output")
    io.add_argument(
        "--checkpoint",
        "--path",
        dest="checkpoint",
        metavar="URL",
        help="a checkpoint of nmtpipe train (--path: fairseq's name)",
    )
    io.add_argument("--output", metavar="URL", help="folder for the outputs")
    io.add_argument("--data", metavar="URL", help="an encode output (default: the training data)")
    io.add_argument(
        "--split",
        "--gen-subset",
        dest="split",
        default="test",
        help="the split of --data (--gen-subset: fairseq's name)",
    )
    io.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="FILE",
        help="raw text to translate instead of a split (repeatable)",
    )
    io.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="FILE",
        help="references of --input, line by line (repeatable)",
    )
    io.add_argument("--format", choices=["arrow", "fairseq"], help="ids (default: as trained)")
    io.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="local cache for remote shards (default: ~/.cache/nmtpipe/shards)",
    )
    io.add_argument(
        "--bleu-tokenize",
        "--sacrebleu-tokenizer",
        "--tokenize",
        dest="bleu_tokenize",
        metavar="NAME",
        help="sacrebleu's tokenizer (default: zh for Chinese targets, else 13a)",
    )
    add_search_arguments(parser)
    job = parser.add_argument_group("job")
    job.add_argument(
        "--nproc",
        type=int,
        default=1,
        help="processes on this machine (torchrun --standalone when above 1)",
    )
    job.add_argument("--max-tokens", type=int, default=4096, help="source tokens per batch")
    job.add_argument("--buffer-size", type=int, default=10_000, help="sentences per window")
    job.add_argument(
        "--max-source-positions", type=int, default=1024, help="longer inputs are truncated"
    )
    job.add_argument(
        "--skip-invalid-size-inputs",
        action="store_true",
        help="skip longer inputs (an empty line in hypotheses.txt)",
    )


def config_from_args(args: argparse.Namespace) -> DecodeConfig:
    if not args.checkpoint or not args.output:
        raise ConfigError("--checkpoint and --output are required")
    search = search_from_args(args)
    names = ["output", "data", "split", "max_tokens", "buffer_size", "max_source_positions",
             "skip_invalid_size_inputs", "bleu_tokenize", "format", "cache_dir"]  # fmt: skip
    return DecodeConfig(
        checkpoint=args.checkpoint, inputs=tuple(args.input), references=tuple(args.reference),
        search=search, **{name: getattr(args, name) for name in names},
    )  # fmt: skip


def report(summary: dict) -> str:
    done = (
        f"translated {summary['sentences']:,} sentences in {summary['seconds']} s "
        f"({summary['sentences_per_s']:,.1f} sentences/s, "
        f"{summary['target_tokens_per_s']:,.0f} target tokens/s, {summary['world']} rank(s))"
    )
    notes = [f"{summary[k]} {k}" for k in ("truncated", "skipped", "unfinished") if summary[k]]
    if notes:
        done += "; " + ", ".join(notes)
    lines = [done]
    for name in ("bleu", "chrf"):
        if name in summary:
            lines.append(f"{summary[f'{name}_line']}  ({summary[f'{name}_signature']})")
    return "\n".join(lines)


def show(summary: dict[str, Any]) -> None:
    logs.show("decode", summary, report(summary))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    return run_torch_job(config_from_args(args), args, beam_args, show)
