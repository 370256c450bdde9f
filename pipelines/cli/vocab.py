"""`nmtpipe vocab` on the command line: flags → VocabConfig."""

from __future__ import annotations

import argparse

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.workflow.vocab import MODELS, VocabConfig, VocabOutcome, run_vocab
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.vocab import hf_vocab
from nmtpipe.transforms.vocab.hf_vocab import HfConfig
from nmtpipe.transforms.vocab.spm_vocab import MODEL_TYPES, SpmConfig
from nmtpipe.transforms.vocab.subword import RESERVED_TOKENS

TAKES_BEAM = True  # options it does not know go to Beam (main.py)
DESCRIPTION = """\
Build the subword vocabulary of a prepared dataset (`nmtpipe prepare`'s --output) on
the driver, and write to --output:

  vocab[.LANG].subwords   --model t2t: Tensor2Tensor's SubwordTextEncoder, the same
                          file T2T writes for the same token counts and options
  spm[.LANG].model/.vocab --model unigram|bpe: SentencePiece, trained on a deterministic
                          sample of the training split drawn in Beam (and the same
                          model as tokenizer[.LANG].json where one reproduces it)
  tokenizer[.LANG].json   --model wordpiece|bpe-hf|unigram-hf: Hugging Face tokenizers,
                          trained on the same sample; the whole pipeline in one file
                          (normaliser, pre-tokeniser, model, </s> appended, decoder)
  dict.SRC.txt dict.TGT.txt  fairseq dictionaries of the same vocabulary
  manifest.json           written last: files, sizes, sha256, options, the bisection

--joined builds one vocabulary for both languages (like fairseq's --joined-dictionary).
The token-count files are checked against their sha256 as they are read: a damaged
one stops the step with one line naming it.
"""
EPILOG = """\
examples:
  nmtpipe vocab --prepared runs/prepared --model t2t --vocab-size 8192 --joined --output runs/vocab
  nmtpipe vocab --prepared s3://bucket/prepared --model unigram --vocab-size 32000 \\
      --sample-sentences 2000000 --output s3://bucket/vocab
  nmtpipe vocab --prepared runs/prepared --model bpe-hf --vocab-size 8000 --joined \\
      --hf-pre-tokenizer byte-level --output runs/vocab-bpe
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    main = parser.add_argument_group("vocabulary")
    main.add_argument("--prepared", metavar="URL", help="a committed `nmtpipe prepare` output")
    main.add_argument("--output", metavar="URL", help="where to write the vocabulary")
    main.add_argument("--model", choices=MODELS, default="t2t", help="vocabulary type")
    main.add_argument(
        "--vocab-size",
        type=int,
        default=8192,
        metavar="N",
        help="target size",
    )
    main.add_argument(
        "--joined",
        "--joined-dictionary",
        dest="joined",
        action="store_true",
        help="one vocabulary for both languages (--joined-dictionary: fairseq's name)",
    )
    logs.add_rebuild_flags(main)

    t2t = parser.add_argument_group("Tensor2Tensor subwords (--model t2t)")
    t2t.add_argument(
        "--max-subtoken-length",
        type=int,
        metavar="L",
        help="T2T's max_subtoken_length (subtokens up to L-1 characters); "
        "bounds the cost of long unspaced tokens",
    )
    t2t.add_argument(
        "--file-byte-budget",
        type=float,
        metavar="B",
        help="build from T2T's generate_lines_for_vocab sample of B characters per language "
        "instead of all token counts",
    )
    t2t.add_argument(
        "--max-tokens-in-memory",
        type=int,
        metavar="N",
        help="build from the N most frequent tokens only (bounds driver memory)",
    )
    t2t.add_argument(
        "--reserved-tokens",
        default=",".join(RESERVED_TOKENS),
        metavar="T,...",
        help="reserved tokens, which must start with T2T's <pad>,<EOS>",
    )
    t2t.add_argument(
        "--min-count-range",
        default="1,1000",
        metavar="LO,HI",
        help="bisection bounds for min_count (T2T: 1,1000)",
    )

    sp = parser.add_argument_group("SentencePiece (--model unigram|bpe)")
    sp.add_argument(
        "--sample-sentences",
        type=int,
        default=VocabConfig.sample_sentences,
        metavar="N",
        help="train on about N pairs' sentences, drawn by hash (SentencePiece and tokenizers)",
    )
    sp.add_argument(
        "--character-coverage",
        type=float,
        default=SpmConfig.character_coverage,
        metavar="F",
        help="spm_train's character_coverage",
    )
    sp.add_argument(
        "--normalization-rule",
        default=SpmConfig.normalization_rule_name,
        metavar="RULE",
        help="spm_train's normalization_rule_name",
    )
    sp.add_argument(
        "--user-defined-symbols",
        default="",
        metavar="S,...",
        help="pieces kept whole, comma-separated",
    )
    sp.add_argument(
        "--spm-threads",
        type=int,
        default=SpmConfig.num_threads,
        metavar="N",
        help="training threads; part of the result, so fixed",
    )
    sp.add_argument("--seed", type=int, default=0, help="SentencePiece's random seed")
    sp.add_argument(
        "--byte-fallback",
        action="store_true",
        help="spm_train's byte_fallback: characters outside the pieces become their UTF-8 "
        "bytes instead of <unk>, so every input can be translated",
    )

    hf = parser.add_argument_group("Hugging Face tokenizers (--model wordpiece|bpe-hf|unigram-hf)")
    hf.add_argument(
        "--hf-normalizer",
        choices=hf_vocab.NORMALIZERS,
        default=HfConfig.normalizer,
        help="the tokenizer's own normaliser, after prepare's",
    )
    hf.add_argument(
        "--hf-pre-tokenizer",
        choices=hf_vocab.PRE_TOKENIZERS,
        help="metaspace: SentencePiece's ▁ word starts; byte-level: GPT-2's bytes, no "
        "unknown text (default: byte-level for bpe-hf, metaspace otherwise)",
    )
    hf.add_argument(
        "--isolate-cjk",
        action=argparse.BooleanOptionalAction,
        help="each Han, kana and Hangul character a word of its own, as BERT splits "
        "Chinese (default: on for wordpiece, which cannot learn unspaced text)",
    )
    hf.add_argument(
        "--min-frequency",
        type=int,
        default=HfConfig.min_frequency,
        metavar="N",
        help="wordpiece, bpe-hf: merge no pair seen fewer than N times",
    )
    hf.add_argument(
        "--max-piece-length",
        type=int,
        default=HfConfig.max_piece_length,
        metavar="L",
        help="bpe-hf, unigram-hf: pieces of at most L characters",
    )


def _hf_config(args: argparse.Namespace) -> HfConfig:
    """The `tokenizers` pipeline of the flags, with the defaults of the model."""
    pre_tokenizer = args.hf_pre_tokenizer or (
        "byte-level" if args.model == "bpe-hf" else "metaspace"
    )
    isolate = args.model == "wordpiece" if args.isolate_cjk is None else args.isolate_cjk
    return HfConfig(
        normalizer=args.hf_normalizer,
        pre_tokenizer=pre_tokenizer,
        isolate_cjk=isolate,
        min_frequency=args.min_frequency,
        max_piece_length=args.max_piece_length,
    )


def _pair(text: str, flag: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"{flag} wants two integers like 1,1000, not {text!r}") from None
    return lo, hi


def config_from_args(args: argparse.Namespace) -> VocabConfig:
    if not args.prepared or not args.output:
        raise ConfigError("--prepared and --output are required")
    try:
        spm = SpmConfig(
            model_type=args.model if args.model in MODEL_TYPES else "unigram",
            character_coverage=args.character_coverage,
            normalization_rule_name=args.normalization_rule,
            user_defined_symbols=tuple(s for s in args.user_defined_symbols.split(",") if s),
            num_threads=args.spm_threads,
            seed=args.seed,
            byte_fallback=args.byte_fallback,
        )
        hf = _hf_config(args)
    except ValueError as e:
        raise ConfigError(str(e)) from e
    return VocabConfig(
        prepared=args.prepared,
        output=args.output,
        model=args.model,
        vocab_size=args.vocab_size,
        joined=args.joined,
        max_subtoken_length=args.max_subtoken_length,
        file_byte_budget=args.file_byte_budget,
        max_tokens_in_memory=args.max_tokens_in_memory,
        reserved_tokens=tuple(t for t in args.reserved_tokens.split(",") if t),
        min_count_bounds=_pair(args.min_count_range, "--min-count-range"),
        sample_sentences=args.sample_sentences,
        spm=spm,
        hf=hf,
    )


def report(outcome: VocabOutcome) -> str:
    doc = outcome.manifest
    head = (
        f"cached: {outcome.output} already holds this vocabulary"
        if outcome.cached
        else f"built {outcome.output} in {outcome.seconds:.1f} s"
    )
    lines = [head]
    for side, info in doc["vocabularies"].items():
        files = ", ".join(info["files"])
        detail = f"  {side:<8} {doc['model']} {info['vocab_size']:>7,} entries  {files}"
        if "pipeline" in info:
            stages = info["pipeline"]
            detail += f"\n           {stages['normalizer']} → {' + '.join(stages['pre_tokenizer'])}"
            detail += f" → {stages['model']} → {stages['post_processor']} → {stages['decoder']}"
        if "min_count" in info:
            detail += f"  (min_count {info['min_count']}, {len(info['bisection'])} builds)"
        lines.append(detail)
    return "\n".join(lines)


def show(outcome: VocabOutcome) -> None:
    sides = {
        side: {"vocab_size": info["vocab_size"], "files": info["files"]}
        for side, info in outcome.manifest["vocabularies"].items()
    }
    logs.show("vocab", logs.outcome_result(outcome, vocabularies=sides), report(outcome))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    show(run_vocab(config_from_args(args), beam_args, **logs.step_options(args)))
    return 0
