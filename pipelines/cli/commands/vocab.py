"""`nmtpipe vocab` on the command line: flags → VocabConfig."""

from __future__ import annotations

import argparse

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from nmtpipe.transforms.storage.commit import StepOutcome

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


CONFIG = VocabConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_step_options(parser, CONFIG, "vocabulary")


def report(outcome: StepOutcome) -> str:
    doc = outcome.manifest
    head = logs.outcome_head(outcome, "vocabulary", "built")
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


def shown(outcome: StepOutcome) -> logs.Shown:
    sides = {
        side: {"vocab_size": info["vocab_size"], "files": info["files"]}
        for side, info in outcome.manifest["vocabularies"].items()
    }
    return logs.Shown(logs.outcome_result(outcome, vocabularies=sides), report(outcome))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    outcome = run_vocab(flags.from_args(CONFIG, args), beam_args, **logs.step_options(args))
    logs.show(args, shown(outcome))
    return 0
