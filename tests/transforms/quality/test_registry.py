"""The registry of pair scorers: the kinds in order, the defaults, and a scorer
registered (one module and one line) brings its options to `prepare`, the workflow YAML
and the reference, and its column and rejects to a prepared dataset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmtpipe.transforms.quality.kinds.rules import RulesScorer
from nmtpipe.transforms.quality.registry import DEFAULT, KINDS, quality_config, register

ROOT = Path(__file__).resolve().parents[3]


def test_the_kinds_and_the_defaults():
    assert list(KINDS) == ["rules", "lexical", "length", "fluency", "neardup"]
    config = quality_config()
    assert config().scorers == DEFAULT == ("rules", "lexical", "length", "neardup")
    parse = config.__dataclass_fields__["scorers"].metadata["nmtpipe.option"].parse
    assert parse("all") == tuple(KINDS) and parse("none") == ()
    assert [k.NAME for k in config(scorers=("neardup", "rules")).kinds()] == ["rules", "neardup"]
    with pytest.raises(ValueError, match="rules already registered"):
        register(type("Again", (RulesScorer,), {}))


# A new scorer, all in one module: its config and its class, and its registry line.
TOY_SCORER = """
from dataclasses import dataclass

import numpy as np

from nmtpipe.transforms.options import option
from nmtpipe.transforms.quality import registry
from nmtpipe.transforms.quality.base import LearnedScorer, Verdicts


@dataclass(frozen=True)
class ToyConfig:
    toy_max_words: int = option(6, metavar="N", help="toy: reject sources of more than N words")


class ToyScorer(LearnedScorer):
    NAME = "toy"
    Config = ToyConfig
    COLUMNS = ("words",)
    REASONS = ("too-wordy",)
    PASSES = 1
    THRESHOLDS = ("toy_max_words",)
    CATCHES = "wordy sources"
    COSTS = "a pass that counts the corpus's pairs"

    def start(self, pass_):
        return np.zeros(1, dtype=np.int64)

    def gather(self, pass_, learned, acc, pairs):
        acc += len(pairs)

    def merge(self, acc, other):
        return acc + other

    def score(self, learned, pairs):
        assert int(learned[0][0]) > 0  # what the pass counted reached the shard writer
        return {"words": np.array([len(s.split()) for s in pairs.src], dtype=np.float32)}

    def learned_pairs(self, learned):
        return int(learned[0][0])

    def verdicts(self, scores, learned_pairs):
        rows = np.flatnonzero(scores["words"] > self.config.toy_max_words)
        return [Verdicts("too-wordy", rows, [f"{int(scores['words'][i])} words" for i in rows])]


registry.register(ToyScorer)
"""
RUN = """
import json, sys

import pyarrow.parquet as pq
sys.path.insert(0, "scripts")
import gen_docs
from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.cli.config_file import load_config

out, corpus, workflow = sys.argv[1:]
code = main(["prepare", "-s", "en", "-t", "zh", "--trainpref", corpus, "--output", out,
             "--scorers", "toy", "--toy-max-words", "4", "--runner=FnApiRunner",
             "--direct_running_mode=in_memory", "--quiet"])
again = main(["rethreshold", out, "--output", out + "-loose", "--toy-max-words", "9",
              "--runner=FnApiRunner", "--direct_running_mode=in_memory", "--quiet"])
pages = gen_docs.pages()
print(json.dumps({
    "code": code,
    "again": again,
    "columns": pq.read_table(out + "/train-00000-of-00001.parquet").column_names,
    "yaml": load_config(workflow).prepare.quality.toy.toy_max_words,
    "help": gen_docs.subparser("prepare").format_help(),
    "cli": pages[gen_docs.CLI / "prepare.md"],
}))
"""


def test_a_registered_scorer_brings_its_options_column_and_rejects(tmp_path):
    corpus = tmp_path / "c"
    Path(f"{corpus}.en").write_text("One two.\nOne two three four five six.\nA cat.\n")
    Path(f"{corpus}.zh").write_text("一二。\n一二三四五六。\n一只猫。\n")
    workflow = tmp_path / "w.yaml"
    workflow.write_text(
        json.dumps(
            {
                "root": str(tmp_path / "root"),
                "prepare": {
                    "src_lang": "en",
                    "tgt_lang": "zh",
                    "trainpref": [str(corpus)],
                    "toy_max_words": 9,
                },
            }
        )
    )
    result = subprocess.run(
        [sys.executable, "-c", TOY_SCORER + RUN, str(tmp_path / "out"), str(corpus), str(workflow)],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout.strip().splitlines()[-1])
    assert shown["code"] == 0 and "score_words" in shown["columns"] and shown["yaml"] == 9
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["rejects"]["too-wordy"] == 1 and "words" in stats["scores"]
    loose = json.loads((tmp_path / "out-loose" / "stats.json").read_text())
    assert shown["again"] == 0 and "too-wordy" not in loose["rejects"]  # its threshold, again
    assert loose["pairs_kept"] == stats["pairs_kept"] + 1
    assert "--toy-max-words N" in shown["help"] and "toy" in shown["help"]
    assert "`--toy-max-words N` (default `6`): toy: reject sources of more" in shown["cli"]
