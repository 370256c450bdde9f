"""`nmtpipe run CONFIG`: configs checked before anything runs, steps cached, --from/--until."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from nmtpipe.pipelines.cli.config_file import example_config, load_config
from nmtpipe.pipelines.cli.main import main
from nmtpipe.transforms.errors import ConfigError
from tests.helpers import IN_MEMORY, command_result, example_lines, train_records, write_pair


def config(tmp_path: Path, **changes) -> Path:
    """A small workflow: 1 in 20 example pairs, a 1,000-entry vocabulary, 4 updates."""
    corpus, held_out = tmp_path / "train", tmp_path / "news"
    if not corpus.with_suffix(".en").exists():  # written once: its identity is an input
        write_pair(corpus, example_lines("tatoeba-cmn", "en")[::40],
                   example_lines("tatoeba-cmn", "zh")[::40])  # fmt: skip
        write_pair(held_out, example_lines("ntrex128-enzh", "en", 5),
                   example_lines("ntrex128-enzh", "zh", 5))  # fmt: skip
    doc = {
        "root": str(tmp_path / "root"),
        "beam": IN_MEMORY,
        "prepare": {"src_lang": "en", "tgt_lang": "zh", "trainpref": [str(corpus)],
                    "valid_fraction": 0.03, "test_fraction": 0.03},
        "vocab": {"vocab_size": 1000, "joined": True},
        "encode": {"formats": ["arrow"]},
        "train": {"max_tokens": 1024, "max_update": 4, "warmup_updates": 2, "log_interval": 1},
        "decode": {"beam": 2, "max_len_a": 0, "max_len_b": 4},
        "evaluate": {"news": {"input": f"{held_out}.en", "reference": f"{held_out}.zh"}},
    }  # fmt: skip
    for key, value in changes.items():
        step, _, option = key.partition("__")
        doc[step] = {**doc[step], option: value} if option else value
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def table(stdout: str) -> dict[str, str]:
    """step → status, from the result the command printed on stdout."""
    return {s["step"]: s["status"] for s in command_result(stdout)["steps"]}


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def updates_logged(root: Path) -> list[int]:
    """The updates of the per-update records in the run's train_log.jsonl."""
    return [record["update"] for record in train_records(root / "checkpoints") if "loss" in record]


def test_the_chain_runs_once_then_only_what_changed(tmp_path, capsys):
    path = config(tmp_path)
    assert main(["run", str(path)]) == 0
    out, first = capsys.readouterr()  # the result on stdout, the report on stderr
    assert table(out) == dict.fromkeys(["prepare", "vocab", "encode", "train", "decode"], "ran")
    root = tmp_path / "root"
    scores = json.loads((root / "decoded" / "scores.json").read_text())
    assert "chrf" in scores and scores["sentences"] > 0
    # The extra test set, and what the run says of the test sets: sacreBLEU's lines and
    # five translations to read.
    news = json.loads((root / "decoded" / "news" / "scores.json").read_text())
    assert news["sentences"] == 5 and news["input"] == [f"{tmp_path}/news.en"]
    assert command_result(out)["scores"]["news"]["bleu_line"] == news["bleu_line"]
    assert f"test ({scores['sentences']:,} sentences): {scores['bleu_line']}" in first
    assert f"news (5 sentences): {news['bleu_line']}" in first and "|tok:zh|" in first
    report = first[first.index("5 translations of the test split:") :].splitlines()[1:16]
    assert [line.split()[0] for line in report] == ["source", "reference", "hypothesis"] * 5
    assert json.loads((root / "checkpoints" / "train_summary.json").read_text())["updates"] == 4
    # stdout is one document, the run's, with the results each step printed as a command
    # inside (decode's: the test split's, then the news set's); training's per-update
    # records are in train_log.jsonl beside the checkpoints.
    steps = command_result(out)["steps"]
    assert [len(step["results"]) for step in steps] == [1, 1, 1, 1, 2]
    assert steps[3]["results"][0]["updates"] == 4 and steps[4]["results"][1]["sentences"] == 5
    assert updates_logged(root) == [1, 2, 3, 4]
    # Each output is committed by its manifest, decoding's naming the checkpoint the
    # training chose (the best one once a validation chose one, else the last).
    trained = manifest(root / "checkpoints")
    best = (root / "checkpoints" / "checkpoint_best.pt").exists()
    assert trained["kind"] == "nmtpipe.train"
    assert trained["checkpoint"] == ("checkpoint_best.pt" if best else "checkpoint_last.pt")
    (chosen,) = [f for f in trained["files"] if f["path"] == trained["checkpoint"]]
    assert manifest(root / "decoded")["checkpoint"]["sha256"] == chosen["sha256"]
    assert manifest(root / "decoded" / "news")["name"] == "news"
    assert not (root / "workflow").exists()
    # It ends by saying where the model, its curves, the translations and the report are.
    where = {
        "model": f"{root}/checkpoints/{trained['checkpoint']}",
        "curves": f"{root}/checkpoints/learning_curve.svg",
        "translations (test)": f"{root}/decoded/hypotheses.txt",
        "translations (news)": f"{root}/decoded/news/hypotheses.txt",
        "report": f"{root}/encoded/report.html",
    }
    assert command_result(out)["places"] == where
    block = first.rstrip("\n").splitlines()[-6:]
    assert block == ["where things are:"] + [f"  {k:<19}  {v}" for k, v in where.items()]
    assert all(Path(url).is_file() for url in where.values())
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert set(table(out).values()) == {"cached"}
    # Found cached, a step shows what it holds as when it ran.
    assert command_result(out)["steps"][3]["results"][0]["updates"] == 4
    # A decoding option: only decode runs again.
    path = config(tmp_path, decode__beam=3)
    assert main(["run", str(path)]) == 0
    after = table(capsys.readouterr().out)
    assert after["decode"] == "ran" and after["train"] == "cached" and after["encode"] == "cached"
    # More updates: training resumes where it stopped, decoding follows.
    path = config(tmp_path, decode__beam=3, train__max_update=6)
    assert main(["run", str(path)]) == 0
    out, err = capsys.readouterr()
    assert table(out)["train"] == "ran" and table(out)["decode"] == "ran"
    assert f"continuing the model in {root}/checkpoints from update 4" in err
    assert json.loads((root / "checkpoints" / "train_summary.json").read_text())["resumed"]
    assert updates_logged(root) == [1, 2, 3, 4, 5, 6]  # the resumed run appended
    # --from/--until pick a part of the chain.
    assert main(["run", str(path), "--until", "encode"]) == 0
    part = table(capsys.readouterr().out)
    assert part["prepare"] == "cached" and part["train"] == "skipped"
    # Defaults written out are the same config as defaults left out: nothing runs again.
    train = {"max_tokens": 1024, "max_update": 6, "warmup_updates": 2, "log_interval": 1}
    defaults = {"arch": "transformer_tiny", "lr": 5e-4, "seed": 1, "label_smoothing": 0.1}
    path = config(tmp_path, decode__beam=3, decode__max_tokens=4096, train={**train, **defaults})
    assert main(["run", str(path)]) == 0
    assert set(table(capsys.readouterr().out).values()) == {"cached"}
    # A root with the records of an unreleased nmtpipe (`{root}/workflow/`) is refused in
    # one line that names the folder and says what to do; once it is gone, the run goes on.
    (root / "workflow").mkdir()
    (root / "workflow" / "train.json").write_text('{"fingerprint": "0"}')
    assert main(["run", str(path)]) == 1
    out, err = capsys.readouterr()
    assert table(out)["train"] == "failed" and table(out)["encode"] == "cached"
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert line == (
        f"nmtpipe train: error: {root}/workflow holds records of an unreleased nmtpipe, which "
        f"this one does not read: delete {root}/workflow; the next run then trains on from "
        f"the checkpoints in {root}/checkpoints and decodes again"
    )
    assert main(["run", str(path), "--from", "decode"]) == 1
    assert f"delete {root}/workflow" in capsys.readouterr().err
    shutil.rmtree(root / "workflow")
    assert main(["run", str(path)]) == 0
    assert set(table(capsys.readouterr().out).values()) == {"cached"}
    # Another model (here: another dropout) is refused: the model there is never deleted.
    path = config(tmp_path, decode__beam=3, train={**train, "dropout": 0.2})
    assert main(["run", str(path)]) == 1
    out, err = capsys.readouterr()
    assert table(out)["train"] == "failed" and "holds another model (other architecture" in err
    assert f"delete {root}/checkpoints to train this one there" in err
    assert (root / "checkpoints" / "manifest.json").exists()


def test_a_later_step_alone_needs_the_earlier_ones(tmp_path, capsys):
    assert main(["run", str(config(tmp_path)), "--from", "train"]) == 1
    assert "holds no committed encode output" in capsys.readouterr().err
    assert main(["run", str(config(tmp_path)), "--from", "decode", "--until", "train"]) == 2


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"colour": "blue"},
            "unknown key colour; a config's keys are vars, root, beam, prepare, "
            "vocab, encode, train, decode, evaluate, refresh",
        ),
        (
            {"vocabulary": {"vocab_size": 10}},
            "unknown key vocabulary (did you mean vocab?); "
            "a config's keys are vars, root, beam, prepare, vocab, encode, train, decode, "
            "evaluate, refresh",
        ),
        (
            {"vocab__vocab_sise": 10},
            "vocab.vocab_sise: not an option of nmtpipe vocab (did you mean vocab_size?)",
        ),
        ({"train__max_tokens": "lots"}, "train.max_tokens: invalid int value: 'lots'"),
        ({"vocab__joined": "yes"}, "vocab.joined: wants true or false"),
        ({"encode__output": "elsewhere"}, "encode.output: set by the workflow"),
        ({"decode__lenpen": None}, "decode.lenpen: wants a value"),
        ({"root": None}, "root (the storage URL every step writes under) is required"),
        ({"beam": "--runner=X"}, "beam is a list of Beam options"),
        ({"vocab__model": "word-piece"}, "invalid choice: 'word-piece'"),
    ],
)
def test_bad_configs_are_refused_before_anything_runs(tmp_path, capsys, changes, message):
    path = config(tmp_path, **changes)
    with pytest.raises(ConfigError) as error:
        load_config(str(path))
    assert message in str(error.value) and str(path) in str(error.value)
    assert main(["run", str(path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "root").exists()


def test_the_corpus_quality_options_work_from_the_config(tmp_path):
    """What the demo sets in YAML: script conversion, per-side normalisation, langid."""
    path = config(tmp_path, prepare__zh_script="simplified", prepare__tgt_normalize="nfkc",
                  prepare__langid=False, prepare__langid_threshold=0.95,
                  prepare__keep_overlap=True)  # fmt: skip
    prepare = load_config(str(path)).prepare
    assert (prepare.zh_script, prepare.tgt_normalize, prepare.src_normalize) == (
        "simplified", "nfkc", None,
    )  # fmt: skip
    assert prepare.langid is False and not prepare.langid_config().enabled
    assert prepare.langid_threshold == 0.95 and prepare.keep_overlap
    assert load_config(str(config(tmp_path, prepare__langid=True))).prepare.langid is True
    assert load_config(str(config(tmp_path))).prepare.langid_config().enabled  # the default


def test_broken_files_and_the_bundled_example(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the example's root is relative: runs/ of a user's checkout
    bad = tmp_path / "bad.yaml"
    bad.write_text("root: [unclosed\n", encoding="utf-8")
    assert main(["run", str(bad)]) == 2 and "not valid YAML" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "none.yaml")]) == 1
    assert "no such config" in capsys.readouterr().err
    assert main(["run"]) == 2 and "give a CONFIG file or --example" in capsys.readouterr().err
    example = load_config(example_config())
    assert example.root == "runs/example"
    assert [p.rsplit("/", 1)[-1] for p in example.prepare.trainpref] == ["tatoeba-cmn"]
    encode = example.encode
    assert (encode.prepared, encode.vocab, encode.output) == (
        "runs/example/prepared", "runs/example/vocab", "runs/example/encoded",
    )  # fmt: skip
    assert example.vocab.spm.byte_fallback and example.nproc == {"train": 2, "decode": 2}
    (news,) = example.evaluate  # the out-of-domain set, from the bundled folder
    assert news.name == "ntrex128" and all(Path(p).is_file() for p in news.inputs + news.references)
    recipe = load_config(example_config("tatoeba"))  # nmtpipe run --example tatoeba
    assert not recipe.train.average_last
    assert recipe.train.best_checkpoint_metric == "bleu" and recipe.evaluate == example.evaluate


def test_the_gpu_recipe_is_the_recipes_data_with_a_larger_model():
    # A config cannot include another, so tatoeba-gpu.yaml repeats tatoeba.yaml's data
    # steps: they must stay the same, or the two recipes would learn from different data.
    def sections(name: str) -> dict:
        return yaml.safe_load(Path(example_config(name)).read_text(encoding="utf-8"))

    gpu_doc, cpu_doc = sections("tatoeba-gpu"), sections("tatoeba")
    for step in ("prepare", "vocab", "encode", "evaluate"):
        assert gpu_doc[step] == cpu_doc[step], step
    gpu = load_config(example_config("tatoeba-gpu"))  # nmtpipe run --example tatoeba-gpu
    assert gpu.root == "runs/tatoeba-gpu" and gpu.nproc == {"train": 1, "decode": 1}
    assert (gpu.train.arch, gpu.train.max_tokens, gpu.train.max_update) == (
        "transformer_small", 8192, 20000,
    )  # fmt: skip
    assert gpu.train.best_checkpoint_metric == "bleu" and gpu.train.patience == 10
    assert gpu.decode.search.beam == 5 and gpu.train.save_dir == "runs/tatoeba-gpu/checkpoints"


def _digests(root: Path, step: str) -> dict[str, str]:
    doc = json.loads((root / step / "manifest.json").read_text())
    return {f["path"]: f["sha256"] for f in doc["files"]}


def test_the_beam_part_of_the_chain_gives_the_same_bytes_on_the_portable_runner(
    tmp_path, capsys, portable_runner
):
    """The path Flink and Spark take: the job service plus an EXTERNAL worker pool."""
    local = config(tmp_path)
    assert main(["run", str(local), "--until", "encode"]) == 0
    capsys.readouterr()
    portable = config(tmp_path, root=str(tmp_path / "portable"), beam=portable_runner)
    assert main(["run", str(portable), "--until", "encode"]) == 0
    statuses = table(capsys.readouterr().out)
    assert [statuses[s] for s in ("prepare", "vocab", "encode")] == ["ran"] * 3
    for step in ("prepared", "vocab", "encoded"):
        assert _digests(tmp_path / "portable", step) == _digests(tmp_path / "root", step), step


def test_variables_in_paths_set_by_the_config_or_the_command_line(tmp_path, capsys):
    path = config(tmp_path)
    doc = yaml.safe_load(path.read_text())
    corpus = doc["prepare"].pop("trainpref")[0]
    doc["vars"] = {"corpora": str(Path(corpus).parent), "unused": None}
    doc["prepare"]["train_pair"] = [["{corpora}/train.en", "{corpora}/train.zh"]]
    doc["evaluate"]["news"]["input"] = "{example}/ntrex128-enzh.en.gz"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    loaded = load_config(str(path))
    (pair,) = loaded.prepare.train_pair
    assert (pair.src, pair.tgt) == (corpus + ".en", corpus + ".zh")
    assert (
        loaded.evaluate[0].inputs[0] == f"{example_config().rsplit('/', 1)[0]}/ntrex128-enzh.en.gz"
    )
    elsewhere = load_config(str(path), {"corpora": "/srv"})
    assert elsewhere.prepare.train_pair[0].src == "/srv/train.en"
    with pytest.raises(ConfigError, match=r"--set other: .* has no variable other \(its vars: "
                       r"corpora, unused\)"):  # fmt: skip
        load_config(str(path), {"other": "x"})
    doc["vars"]["corpora"] = None
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"prepare\.train_pair: \{corpora\} is not set: give "
                       r"--set corpora=VALUE, or vars\.corpora in the config"):  # fmt: skip
        load_config(str(path))
    with pytest.raises(SystemExit):
        main(["run", str(path), "--set", "corpora"])
    assert "argument --set: wants NAME=VALUE" in capsys.readouterr().err


def test_the_t2t_enzh_recipe_reads_a_folder_the_user_names():
    recipe = load_config(example_config("t2t-enzh"))  # T2T's own download folder by default
    pairs = recipe.prepare.train_pair
    assert pairs[0].src == (
        "tar://training-parallel-nc-v13/news-commentary-v13.zh-en.en::"
        "/tmp/t2t_datagen/training-parallel-nc-v13.tgz"
    )
    members = [p.tgt.split("::")[0].removeprefix("tar://") for p in pairs]
    assert "cwmt/neu2017/NEU_cn.txt" in members and "cwmt/datum2017/Book20_cn.txt" in members
    assert len(pairs) == 1 + 4 + 20  # News Commentary, four CWMT corpora, 20 DATUM books
    (dev,) = load_config(example_config("t2t-enzh"), {"data": "/srv/t2t"}).prepare.valid_pair
    assert dev.src == "tar://dev/newsdev2017-enzh-src.en.sgm::/srv/t2t/dev.tgz"
