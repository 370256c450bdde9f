"""`nmtpipe prepare` on the command line: flags (after fairseq-preprocess) → PrepareConfig."""

from __future__ import annotations

import argparse
from importlib import resources

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage.commit import StepOutcome
from nmtpipe.transforms.storage.inputs import parse_columns
from nmtpipe.transforms.text.filters import REASONS, FilterConfig
from nmtpipe.transforms.text.langid import KNOWN
from nmtpipe.transforms.text.normalize import FORMS, NormalizeConfig
from nmtpipe.transforms.text.zh_script import SCRIPTS

TAKES_BEAM = True  # options it does not know go to Beam (main.py)
DESCRIPTION = """\
Read raw parallel corpora (pairs of line-aligned files, plain or .gz/.bz2/.xz/.zst,
members of .tar/.tgz archives as tar://MEMBER::ARCHIVE, or TSV files) from any fsspec
URL, and write to --output, on Apache Beam:

  {split}-NNNNN-of-NNNNN.parquet   pairs (id, src, tgt, origin, line), per split and shard
  counts/{lang|joined}-*.parquet   Tensor2Tensor token counts of the train split
  counts/chars.parquet             character counts (the alphabet)
  rejects/rejects-*.parquet        every rejected line: origin, line, reason, raw bytes
  stats.json                       pairs read/kept, rejects by reason, lengths
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
"""
EXAMPLE_TRAIN = "tatoeba-cmn"


def _prefixes(values: list[str] | None) -> tuple[str, ...]:
    """fairseq accepts comma-separated prefixes; so do we, and repeated flags too."""
    return tuple(p for v in values or [] for p in v.split(",") if p)


def _shards(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("input")
    data.add_argument(
        "-s",
        "--src-lang",
        "--source-lang",
        dest="src_lang",
        metavar="SRC",
        help="source language code, e.g. en",
    )
    data.add_argument(
        "-t",
        "--tgt-lang",
        "--target-lang",
        dest="tgt_lang",
        metavar="TGT",
        help="target language code, e.g. zh",
    )
    data.add_argument(
        "--trainpref",
        action="append",
        metavar="PREFIX",
        help="training data: PREFIX.SRC and PREFIX.TGT (compression suffix found by itself; "
        "globs and comma-separated lists allowed; repeatable)",
    )
    data.add_argument(
        "--validpref",
        action="append",
        metavar="PREFIX",
        help="validation data (default: carved from the training data by hash)",
    )
    data.add_argument(
        "--testpref",
        action="append",
        metavar="PREFIX",
        help="test data (default: carved from the training data by hash)",
    )
    data.add_argument(
        "--tsv",
        action="append",
        metavar="FILE_OR_GLOB",
        help="training data as TSV files instead of (or besides) --trainpref",
    )
    data.add_argument(
        "--tsv-columns",
        default="0,1",
        metavar="S,T",
        help="TSV columns of source and target",
    )
    data.add_argument(
        "--example",
        action="store_true",
        help=f"use the example corpus bundled with nmtpipe: {EXAMPLE_TRAIN} (en-zh), its "
        "validation and test splits carved from it",
    )

    out = parser.add_argument_group("output")
    out.add_argument(
        "--output",
        "--destdir",
        dest="output",
        metavar="URL",
        help="where to write (local path, file://, s3://, gs://, memory://)",
    )
    out.add_argument(
        "--num-shards",
        type=_shards,
        metavar="N",
        help="train shards (default: one per ~32 MB of input)",
    )
    out.add_argument(
        "--valid-shards",
        type=_shards,
        default=1,
        metavar="N",
        help="validation shards",
    )
    out.add_argument("--test-shards", type=_shards, default=1, metavar="N", help="test shards")
    logs.add_rebuild_flags(out)

    split = parser.add_argument_group("splitting")
    split.add_argument(
        "--valid-fraction",
        type=float,
        default=0.01,
        metavar="F",
        help="share of the training data carved out as validation set when no --validpref is given",
    )
    split.add_argument(
        "--test-fraction",
        type=float,
        default=0.01,
        metavar="F",
        help="likewise for the test set",
    )
    split.add_argument(
        "--split-key",
        choices=("pair", "src", "tgt"),
        default="pair",
        help="what the split hash covers; 'src' keeps all translations of a sentence in one split",
    )
    split.add_argument("--seed", type=int, default=0, help="salt of the split and shard hash")

    clean = parser.add_argument_group("cleaning")
    clean.add_argument(
        "--normalize",
        choices=FORMS,
        default="nmt_nfkc",
        help="Unicode normalisation of both sides; nmt_nfkc is SentencePiece's. Chinese and "
        "Japanese sides keep their full-width punctuation (，！（）) in every form",
    )
    for side, name in (("src", "source"), ("tgt", "target")):
        clean.add_argument(
            f"--{side}-normalize",
            choices=FORMS,
            metavar="FORM",
            help=f"the {name} side's normalisation, if not --normalize's",
        )
    clean.add_argument(
        "--q2b",
        action="store_true",
        help="map full-width ASCII and U+3000 to half-width, punctuation of Chinese and "
        "Japanese sides included",
    )
    clean.add_argument(
        "--keep-whitespace",
        action="store_true",
        help="do not collapse runs of whitespace or strip the ends",
    )
    clean.add_argument(
        "--zh-script",
        choices=SCRIPTS,
        default="keep",
        help="convert the Chinese side to one script with OpenCC (phrase by phrase) before "
        "deduplication and vocabulary building; Tatoeba and crawls mix both",
    )

    filters = parser.add_argument_group(
        "filters", "each counted in stats.json and kept in rejects/ with its reason"
    )
    filters.add_argument(
        "--max-chars",
        type=int,
        default=FilterConfig.max_chars,
        metavar="N",
        help="too-long: a side of more than N characters (after normalisation)",
    )
    filters.add_argument(
        "--max-t2t-tokens",
        type=int,
        default=FilterConfig.max_tokens,
        metavar="N",
        help="too-long: a side of more than N Tensor2Tensor tokens",
    )
    filters.add_argument(
        "--max-length-ratio",
        type=float,
        default=FilterConfig.max_length_ratio,
        metavar="R",
        help="length-ratio: the longer side more than R times the shorter, in characters "
        "weighted by script (Han 3, Hangul 2, kana 1.5, others 1), so that English and "
        "Chinese compare; no correct NTREX-128 or Tatoeba en-zh pair passes 5.1",
    )
    filters.add_argument(
        "--keep-copies",
        action="store_true",
        help="keep copy pairs (target equal to the source, ignoring case)",
    )
    filters.add_argument(
        "--langid",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="wrong-language: check that each side of the training input is in its "
        "language (script evidence, function words, then lingua for the unclear lines); "
        f"on by default for the languages it knows ({', '.join(KNOWN)}); sets given with "
        "--validpref/--testpref are kept whole",
    )
    filters.add_argument(
        "--langid-threshold",
        type=float,
        default=0.9,
        metavar="P",
        help="the model confidence that a line is not in its language needed to reject it",
    )
    filters.add_argument(
        "--langid-min-letters",
        type=_shards,
        default=16,
        metavar="N",
        help="Latin-script lines with fewer letters are never rejected by the model alone "
        "(names, numbers, 'OK.', two-word exclamations)",
    )
    filters.add_argument(
        "--keep-overlap",
        action="store_true",
        help="keep train and valid pairs that share a source or target with a test pair, "
        "and train pairs sharing one with a valid pair (overlap; exact duplicates across "
        "splits are removed all the same)",
    )

    perf = parser.add_argument_group("performance")
    perf.add_argument(
        "--chunk-lines",
        type=_shards,
        default=5000,
        metavar="N",
        help="lines per Beam element when reading",
    )
    perf.add_argument(
        "--count-buckets",
        type=_shards,
        metavar="N",
        help="token-count files per language (default: as many as train shards)",
    )
    perf.add_argument(
        "--spill-dir",
        default="auto",
        metavar="URL",
        help="where cleaned batches are handed to the shard writers: a directory every "
        "worker can reach, or 'none' for Beam's shuffle ('auto': the local temp "
        "directory with the local runners, Beam's shuffle otherwise)",
    )
    perf.add_argument(
        "--count-fanout",
        type=_shards,
        default=4,
        metavar="N",
        help="hot-key fan-out of the token-count combiner",
    )


def _example_defaults(args: argparse.Namespace) -> None:
    folder = resources.files("nmtpipe.pipelines") / "example"
    args.src_lang = args.src_lang or "en"
    args.tgt_lang = args.tgt_lang or "zh"
    args.trainpref = args.trainpref or [str(folder / EXAMPLE_TRAIN)]


def config_from_args(args: argparse.Namespace) -> PrepareConfig:
    if args.example:
        _example_defaults(args)
    if not args.src_lang or not args.tgt_lang:
        raise ConfigError("--src-lang and --tgt-lang are required (or --example)")
    if not args.output:
        raise ConfigError("--output is required")
    try:
        normalize = NormalizeConfig(args.normalize, args.q2b, not args.keep_whitespace)
        filters = FilterConfig(
            args.max_chars, args.max_t2t_tokens, args.max_length_ratio, not args.keep_copies
        )
    except ValueError as e:
        raise ConfigError(str(e)) from e
    return PrepareConfig(
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        output=args.output,
        trainpref=_prefixes(args.trainpref),
        validpref=_prefixes(args.validpref),
        testpref=_prefixes(args.testpref),
        tsv=_prefixes(args.tsv),
        tsv_columns=parse_columns(args.tsv_columns),
        num_shards=args.num_shards,
        valid_shards=args.valid_shards,
        test_shards=args.test_shards,
        valid_fraction=args.valid_fraction,
        test_fraction=args.test_fraction,
        split_key=args.split_key,
        seed=args.seed,
        normalize=normalize,
        src_normalize=args.src_normalize,
        tgt_normalize=args.tgt_normalize,
        filters=filters,
        langid=args.langid,
        langid_threshold=args.langid_threshold,
        langid_min_letters=args.langid_min_letters,
        zh_script=args.zh_script,
        keep_overlap=args.keep_overlap,
        chunk_lines=args.chunk_lines,
        count_buckets=args.count_buckets,
        count_fanout=args.count_fanout,
        spill_dir=args.spill_dir,
    )


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
    lines = [
        head,
        f"  read     {s['pairs_read']:>10,}",
        f"  kept     {s['pairs_kept']:>10,}   {splits}",
        f"  rejected {s['pairs_rejected']:>10,}   {rejects or '-'}",
    ]
    return "\n".join(lines)


def show(outcome: StepOutcome) -> None:
    logs.show("prepare", logs.outcome_result(outcome), report(outcome))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    show(run_prepare(config_from_args(args), beam_args, **logs.step_options(args)))
    return 0
