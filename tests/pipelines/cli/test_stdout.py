"""What each command prints on stdout: one JSON document, its result (translate: its
translations), whether or not it runs others; a terminal gets the document only with
--json; bare `nmtpipe` lists the commands."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from nmtpipe.pipelines.cli.main import COMMANDS, main
from tests.helpers import IN_MEMORY, example_lines, write_pair

SOURCES = ["Good morning.", "Where is the station?"]
SHORT = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "4"]  # an untrained model's search


@dataclass(frozen=True)
class Printed:
    code: int
    out: str
    err: str


class Terminal(io.StringIO):
    """stdout as a person's terminal."""

    def isatty(self) -> bool:
        return True


def nmtpipe(*args: str | Path, stdout: io.StringIO | None = None) -> Printed:
    """`nmtpipe ARGS` in this process, what it printed captured."""
    out, err = stdout or io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in args])
    return Printed(code, out.getvalue(), err.getvalue())


def commands(folder: Path, backward: str) -> dict[str, list[str | Path]]:
    """Every command on a tiny corpus, in an order that gives each its input: the steps
    one by one under a workflow root, then `run` over them and `refresh` of the root;
    `score` with a zh→en model at `backward`."""
    corpus = write_pair(folder / "train", example_lines("tatoeba-cmn", "en")[::20],
                        example_lines("tatoeba-cmn", "zh")[::20])  # fmt: skip
    (folder / "src.en").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    root = folder / "root"
    prepare = {"src_lang": "en", "tgt_lang": "zh", "trainpref": [str(corpus)],
               "valid_fraction": 0.03, "test_fraction": 0.03}  # fmt: skip
    vocab = {"model": "unigram", "vocab_size": 1000, "joined": True, "character_coverage": 0.98}
    train = {"max_tokens": 1024, "max_update": 2, "warmup_updates": 1, "save_interval_updates": 1}
    config = folder / "run.yaml"
    config.write_text(yaml.safe_dump({
        "root": str(root), "beam": IN_MEMORY, "prepare": prepare, "vocab": vocab,
        "train": train, "decode": {"beam": 2, "max_len_a": 0, "max_len_b": 4},
        "refresh": {"train_updates": 1},
    }), encoding="utf-8")  # fmt: skip
    checkpoint = root / "checkpoints" / "checkpoint_last.pt"
    return {
        "prepare": ["prepare", "-s", "en", "-t", "zh", "--trainpref", corpus,
                    "--valid-fraction", "0.03", "--test-fraction", "0.03",
                    "--output", root / "prepared", *IN_MEMORY],
        "rethreshold": ["rethreshold", root / "prepared", "--output", folder / "strict",
                        "--lexical-min", "0.5", *IN_MEMORY],
        "vocab": ["vocab", "--prepared", root / "prepared", "--model", "unigram",
                  "--vocab-size", "1000", "--joined", "--character-coverage", "0.98",
                  "--output", root / "vocab", *IN_MEMORY],
        "encode": ["encode", "--prepared", root / "prepared", "--vocab", root / "vocab",
                   "--output", root / "encoded", *IN_MEMORY],
        "train": ["train", "--data", root / "encoded", "--save-dir", root / "checkpoints",
                  "--max-tokens", "1024", "--max-update", "2", "--warmup-updates", "1",
                  "--save-interval-updates", "1"],
        "average": ["average", "--save-dir", root / "checkpoints", "--last", "2"],
        "decode": ["decode", "--checkpoint", checkpoint, "--output", root / "decoded", *SHORT],
        "score": ["score", "--prepared", root / "prepared", "--forward", checkpoint,
                  "--backward", backward, "--output", folder / "scores"],
        "translate": ["translate", "--checkpoint", checkpoint, "--input", folder / "src.en",
                      *SHORT],
        "export": ["export", "--checkpoint", checkpoint, "--output", folder / "hf"],
        "report": ["report", root / "encoded"],
        "run": ["run", config],
        "refresh": ["refresh", config, "--train", "--decode"],
    }  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("stdout")


@pytest.fixture(scope="module")
def printed(folder, tiny_backward_model) -> dict[str, Printed]:
    """What every command printed (a KeyError for a command this module does not run)."""
    backward = tiny_backward_model["checkpoint"]
    return {name: nmtpipe(*args) for name, args in commands(folder, backward).items()}


@pytest.mark.slow
@pytest.mark.parametrize("command", [name for name in COMMANDS if name != "translate"])
def test_stdout_is_one_json_document_the_commands_result(printed, command):
    done = printed[command]
    assert done.code == 0, done.err[-3000:]
    document = json.loads(done.out)  # one document: anything more is an error here
    assert set(document) == {"command", "result"} and document["command"] == command
    assert done.out.count("\n") == 1  # on one line


@pytest.mark.slow
def test_run_and_refresh_hold_their_steps_results(printed):
    run = json.loads(printed["run"].out)["result"]
    statuses = {step["step"]: step["status"] for step in run["steps"]}
    assert statuses == {"prepare": "cached", "vocab": "cached", "encode": "cached",
                        "train": "ran", "decode": "ran"}  # fmt: skip
    results = {step["step"]: step["results"] for step in run["steps"]}
    assert results["prepare"][0]["cached"] and results["decode"][0]["sentences"] > 0
    refresh = json.loads(printed["refresh"].out)["result"]
    assert refresh["status"] == "published"
    assert refresh["train"]["updates"] == 1 and refresh["decode"]["sentences"] > 0


@pytest.mark.slow
def test_translate_prints_its_translations_and_counts_them_on_stderr(printed):
    done = printed["translate"]
    assert done.code == 0, done.err[-3000:]
    assert len(done.out.splitlines()) == len(SOURCES)
    assert done.err.splitlines()[-1] == f"translated {len(SOURCES)} sentences"


@pytest.mark.slow
def test_a_terminal_gets_the_report_and_the_document_only_with_json(printed, folder):
    report = ["report", folder / "root" / "encoded"]
    seen = nmtpipe(*report, stdout=Terminal())
    assert (seen.code, seen.out) == (0, "") and seen.err.startswith("report: ")
    asked = nmtpipe(*report, "--json", stdout=Terminal())
    assert json.loads(asked.out)["command"] == "report"


def test_bare_nmtpipe_lists_the_commands_on_stderr():
    bare = nmtpipe()
    assert (bare.code, bare.out) == (2, "")
    listed = [line.split()[0] for line in bare.err.splitlines() if line.startswith("  ")]
    assert listed == list(COMMANDS)
    assert "nmtpipe STEP --help" in bare.err
