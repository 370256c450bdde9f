"""`nmtpipe encode` on the command line: flags → EncodeConfig, and a short report."""

from __future__ import annotations

import argparse

from nmtpipe.pipelines.cli import flags, logs
from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
from nmtpipe.transforms.storage.commit import StepOutcome

TAKES_BEAM = True  # options it does not know go to Beam (main.py)
DESCRIPTION = """\
Encode a prepared dataset (`nmtpipe prepare`'s --output) with a vocabulary (`nmtpipe
vocab`'s --output) in Beam, and write to --output:

  arrow/SPLIT-K-of-N.arrow   Arrow IPC streams: id (int64), src and tgt (lists of ids),
                             readable zero-copy with pyarrow.memory_map and by HF datasets
  fairseq/                   a fairseq data-bin: SPLIT[K].SRC-TGT.LANG.bin/.idx (fairseq's
                             MMapIndexedDataset) and dict.LANG.txt, for `fairseq-train`

Each split is cut into parts of about --rows-per-task pairs (whole Parquet row groups of
the prepared shards): one Beam task and one file (Arrow) or file pair (fairseq) each.
  stats.json                 tokens, <unk> counts and length percentiles per split/language
  manifest.json              written last: files, sizes, sha256, dtypes, id layouts, inputs

Every sentence ends in EOS. Arrow ids are the vocabulary's own (T2T: <pad>=0 <EOS>=1;
SentencePiece: <s>=0 <pad>=1 </s>=2 <unk>=3), fairseq ids are fairseq's dictionary ids;
the manifest records both layouts. Python: transforms.encoded_dataset.open_dataset(URL).

Integrity: a task that reads a whole prepared shard checks its sha256 while reading it;
a task that reads some of its row groups checks the pages it reads against their CRC32s
(Parquet page checksums, which prepare writes), so no task reads more than its share.
The vocabulary's files are checked against their sha256 as they are read. A damaged file
stops the step with one line naming it and the command that rebuilds it.
"""
EPILOG = """\
examples:
  nmtpipe encode --prepared runs/prepared --vocab runs/vocab --output runs/encoded
  nmtpipe encode --prepared s3://bucket/prepared --vocab s3://bucket/vocab \\
      --output s3://bucket/encoded --formats fairseq --runner DataflowRunner ...
"""


CONFIG = EncodeConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_step_options(parser, CONFIG, "encoding")


def report(outcome: StepOutcome) -> str:
    doc = outcome.manifest
    head = logs.outcome_head(outcome, "encoding", "encoded into")
    head += "" if outcome.cached else f" on {outcome.runner}"
    lines = [head, f"  formats {', '.join(doc['formats'])}; dtypes {doc['dtypes']}"]
    for split, info in outcome.stats["splits"].items():
        sides = []
        for lang in doc["languages"].values():
            side = info[lang]
            sides.append(
                f"{lang} {side['tokens']:>10,} tokens ({side['unk_percent']}% <unk>, "
                f"p99 length {side['length_tokens']['p99']})"
            )
        lines.append(f"  {split:<6} {info['pairs']:>9,} pairs  " + "  ".join(sides))
    return "\n".join(lines)


def shown(outcome: StepOutcome) -> logs.Shown:
    return logs.Shown(logs.outcome_result(outcome), report(outcome))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    outcome = run_encode(flags.from_args(CONFIG, args), beam_args, **logs.step_options(args))
    logs.show(args, shown(outcome))
    return 0
