"""The registry of vocabulary kinds: every `--model` name has one, in `--model`'s order,
and a kind registered brings its options to the command, the workflow config and the
reference."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ, T2T
from nmtpipe.transforms.vocab.kinds.registry import FILE_PATTERNS, MODELS, kind_of, register
from nmtpipe.transforms.vocab.kinds.t2t import T2tKind

ROOT = Path(__file__).resolve().parents[4]


def test_every_model_has_a_kind():
    assert MODELS == ("t2t", "unigram", "bpe", "wordpiece", "bpe-hf", "unigram-hf")
    assert [kind_of(m).model for m in MODELS] == list(MODELS)
    assert kind_of("t2t").layout == T2T and not kind_of("t2t").encodes_outside_gil
    assert all(kind_of(m).layout == FAIRSEQ and kind_of(m).encodes_outside_gil for m in MODELS[1:])
    with pytest.raises(ValueError, match="unknown vocabulary model 'bpe2'"):
        kind_of("bpe2")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("side", [JOINED, "en"])
def test_a_kinds_files_are_the_drivers(model, side):
    ours = re.compile("^(" + "|".join(FILE_PATTERNS) + ")$")
    assert all(ours.match(name) for name in kind_of(model).files(side))
    assert all((side == JOINED) != (".en." in name) for name in kind_of(model).files(side))


def test_only_t2t_is_refused_by_export():
    assert [m for m in MODELS if kind_of(m).export_refusal] == ["t2t"]


# A new kind, all in one module: its config and its class, and its registry line.
TOY_KIND = """
from dataclasses import dataclass

from nmtpipe.transforms.options import option
from nmtpipe.transforms.vocab.kinds import registry
from nmtpipe.transforms.vocab.kinds.base import VocabKind, infix


@dataclass(frozen=True)
class ToyConfig:
    letters: int = option(26, name="toy_letters", metavar="N", help="the toy's alphabet size")


class ToyKind(VocabKind):
    NAME = "toy"
    TITLE = "Toy letters"
    MODELS = ("toy", "toy-upper")
    FILE_PATTERN = r"toy(\\.[^/]+)?\\.txt"
    Config = ToyConfig
    CONFIG_DEFAULTS = {"letters": lambda o: 52 if o["model"] == "toy-upper" else 26}

    def files(self, side):
        return [f"toy{infix(side)}.txt"]

    # Registered to be listed, parsed and documented; these tests never build one.
    def build(self, source, side, report):
        raise AssertionError("the toy kind is never built")

    def encoder(self, data, dictionary_size):
        raise AssertionError("the toy kind never encodes")


registry.register(ToyKind)
"""
# What the command, a workflow config and the reference make of it, in a process where
# the kind registered before the driver's module was imported.
SHOW = """
import json, sys

sys.path.insert(0, "scripts")
import gen_docs
from nmtpipe.pipelines.cli.config_file import load_config

configs = {name: load_config(path).vocab for name, path in zip(["set", "default"], sys.argv[1:])}
pages = gen_docs.pages()
print(json.dumps({
    "help": gen_docs.subparser("vocab").format_help(),
    "options": {name: config.options() for name, config in configs.items()},
    "letters": configs["set"].toy.letters,
    "cli": pages[gen_docs.CLI / "vocab.md"],
    "config": pages[gen_docs.CONFIG_PAGE],
}))
"""


def test_a_registered_kind_brings_its_options_everywhere(tmp_path):
    def workflow(name, vocab):
        prepare = {"src_lang": "en", "tgt_lang": "zh", "trainpref": ["corpus/train"]}
        doc = {"root": str(tmp_path / "root"), "prepare": prepare, "vocab": vocab}
        (tmp_path / name).write_text(yaml.safe_dump(doc), encoding="utf-8")
        return str(tmp_path / name)

    configs = [
        workflow("set.yaml", {"model": "toy", "vocab_size": 100, "toy_letters": 5}),
        workflow("default.yaml", {"model": "toy-upper"}),
    ]
    result = subprocess.run(
        [sys.executable, "-c", TOY_KIND + SHOW, *configs],
        cwd=ROOT, env={**os.environ, "COLUMNS": "100"}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert "Toy letters (--model toy|toy-upper):\n  --toy-letters N" in shown["help"]
    assert "{t2t,unigram,bpe,wordpiece,bpe-hf,unigram-hf,toy,toy-upper}" in shown["help"]
    assert shown["letters"] == 5
    assert shown["options"] == {
        "set": {"model": "toy", "vocab_size": 100, "joined": False, "letters": 5},
        "default": {"model": "toy-upper", "vocab_size": 8192, "joined": False, "letters": 52},
    }
    toy_flags = "### Toy letters (--model toy|toy-upper)\n\n- `--toy-letters N`: the toy's"
    toy_key = "- `toy_letters` (integer; default: from the section's other options; flag"
    assert toy_flags in shown["cli"] and toy_key in shown["config"]


def test_a_model_name_serves_one_kind():
    with pytest.raises(ValueError, match=r"^Again: t2t already registered$"):
        register(type("Again", (T2tKind,), {"NAME": "again"}))
    assert MODELS.count("t2t") == 1
