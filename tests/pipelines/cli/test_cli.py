"""The `nmtpipe` command as a user meets it: help, one-line errors, exit codes, kills."""

from __future__ import annotations

import gc
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nmtpipe.pipelines.cli.main import entry, main
from tests.helpers import IN_MEMORY, MULTI_PROCESS, example_lines, train_records, write_pair

NMTPIPE = [sys.executable, "-m", "nmtpipe"]


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def prepare_args(trainpref, output, *more: str) -> list[str]:
    return [
        "prepare",
        "-s",
        "en",
        "-t",
        "zh",
        "--trainpref",
        str(trainpref),
        "--output",
        str(output),
        *more,
    ]


def test_the_process_entry_point_freezes_what_is_left_for_the_exit(capsys):
    """`entry` is `main` for a process that ends next: what the run left is frozen, so
    the interpreter's last collection does not walk it."""
    gc.unfreeze()
    try:
        assert entry(["prepare", "--no-such-option"]) == main(["prepare", "--no-such-option"])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert "--no-such-option" in capsys.readouterr().err


def test_help_reads_well(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "prepare" in out and "--runner" in out
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    out = capsys.readouterr().out
    for flag in ("--src-lang", "--trainpref", "--tsv", "--output", "--num-shards", "--example"):
        assert flag in out
    with pytest.raises(SystemExit):
        main(["vocab", "--help"])
    out = capsys.readouterr().out
    for flag in ("--prepared", "--model", "--vocab-size", "--joined", "--max-characters",
                 "--file-byte-budget", "--sample-sentences", "--character-coverage"):  # fmt: skip
        assert flag in out
    code, out, _ = run_cli(capsys, "prepare", "--help-beam")
    assert code == 0 and "--direct_num_workers" in out and "--flink_master" in out


def test_unknown_options_are_usage_errors(capsys, small_corpus, tmp_path):
    code, _, err = run_cli(
        capsys,
        *prepare_args(small_corpus, tmp_path / "o", "--trainpre", "x", "--num_workers_typo=2"),
    )
    assert code == 2
    assert err.strip().splitlines() == [
        "nmtpipe prepare: error: unknown options --trainpre (did you mean --trainpref?), "
        "--num_workers_typo (did you mean --num_workers?); see --help and --help-beam"
    ]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["prepare", "--exmaple"], "nmtpipe prepare: error: unknown option --exmaple (did you "
         "mean --example?); see --help and --help-beam"),
        (["vocab", "--runer=FnApiRunner"], "nmtpipe vocab: error: unknown option --runer (did "
         "you mean --runner?); see --help and --help-beam"),
        (["train", "--max-updates", "3"], "nmtpipe train: error: unknown option --max-updates "
         "(did you mean --max-update?); see nmtpipe train --help"),
        (["decode", "--bem", "5"], "nmtpipe decode: error: unknown option --bem (did you mean "
         "--beam?); see nmtpipe decode --help"),
        (["run", "--untill", "vocab"], "nmtpipe run: error: unknown option --untill (did you "
         "mean --until?); see nmtpipe run --help"),
        (["refresh", "--exmaple"], "nmtpipe refresh: error: unknown option --exmaple (did you "
         "mean --example?); see --help and --help-beam"),
    ],
)  # fmt: skip
def test_a_mistyped_option_gets_a_did_you_mean_before_anything_else(capsys, argv, line):
    code, out, err = run_cli(capsys, *argv)
    assert (code, out, err.strip().splitlines()) == (2, "", [line])


def _help(capsys, command: str) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out


def test_every_option_of_every_command_has_help_and_shows_its_default(capsys):
    from nmtpipe.pipelines.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.choices and "train" in a.choices).choices
    for name, sub in commands.items():
        text = " ".join(_help(capsys, name).split())
        assert "examples:" in text, name
        assert ("--help-beam" in text) == (
            name in {"prepare", "rethreshold", "vocab", "encode", "refresh"}
        )
        for action in sub._actions:
            if not action.option_strings or action.dest in ("help", "help_beam"):
                continue
            assert action.help, f"{name} {action.option_strings[0]} has no help"
            if action.default not in (None, False, []) and action.default is not True:
                shown = f"(default: {action.default})"
                assert text.count(shown) >= 1, f"{name} {action.option_strings[0]}: {shown}"
    # Defaults come from argparse, never written by hand beside them.
    assert "(default: 4096) (default: 4096)" not in _help(capsys, "train")


def test_a_command_imports_no_other_commands_module():
    """Each command module imports what its command needs (torch, matplotlib, Beam's
    graphs); a command's start must not pay for the others'."""
    probe = (
        "import sys\n"
        "from nmtpipe.pipelines.cli.main import COMMANDS, main\n"
        "try:\n    main(['average', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(n for n, (m, _) in COMMANDS.items() if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "usage: nmtpipe average" in out
    assert out.splitlines()[-1] == "['average']"


# A run of each command that runs no Beam pipeline, as far as a missing input lets it go:
# past its parser and into its job, whose modules are loaded by then.
NO_BEAM_RUNS = {
    "train": ["--data", "{tmp}/encoded", "--save-dir", "{tmp}/checkpoints"],
    "decode": ["--checkpoint", "{tmp}/c.pt", "--data", "{tmp}/encoded", "--output", "{tmp}/o"],
    "score": ["--prepared", "{tmp}/p", "--forward", "{tmp}/f.pt", "--backward", "{tmp}/b.pt"],
    "translate": ["--checkpoint", "{tmp}/c.pt"],
    "export": ["--checkpoint", "{tmp}/c.pt", "--output", "{tmp}/exported"],
    "average": ["--checkpoints", "{tmp}/a.pt", "{tmp}/b.pt", "--output", "{tmp}/avg.pt"],
    "report": ["{tmp}/prepared"],
}


@pytest.mark.parametrize("command", sorted(NO_BEAM_RUNS))
def test_the_commands_that_run_no_beam_never_import_it(command, tmp_path):
    """Beam's start (lean import, memoised introspection, the exit's freeze) is for the
    commands that run it: in a process of its own (`entry`, as `nmtpipe` runs), neither
    the help of a torch command (or `report`) nor a run of it loads a Beam module."""
    args = [arg.format(tmp=tmp_path) for arg in NO_BEAM_RUNS[command]]
    probe = (
        "import sys\n"
        "from nmtpipe.pipelines.cli.main import entry\n"
        f"try:\n    entry([{command!r}, '--help'])\nexcept SystemExit:\n    pass\n"
        f"print('exit', entry([{command!r}, *{args!r}]))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'apache_beam')[:3])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert f"usage: nmtpipe {command}" in done.stdout
    assert done.stdout.splitlines()[-2:] == ["exit 1", "[]"], done.stderr
    assert f"nmtpipe {command}: error: " in done.stderr or "FileNotFoundError" in done.stderr


def test_the_contract_names_every_command_that_runs_no_beam():
    """pyproject.toml's import contract forbids Beam to the modules of exactly the
    commands outside `RUNS_BEAM`, and this file runs each of them."""
    tomllib = pytest.importorskip("tomllib")
    from nmtpipe.pipelines.cli.main import COMMANDS, RUNS_BEAM

    project = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    contracts = project["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"].startswith("the commands that run no Beam")]
    assert "apache_beam" in contract["forbidden_modules"]
    assert not contract.get("allow_indirect_imports")
    others = {name for name in COMMANDS if name not in RUNS_BEAM}
    assert set(contract["source_modules"]) == {COMMANDS[name][0] for name in others}
    assert set(NO_BEAM_RUNS) == others


def test_the_commands_that_take_beam_options_run_beam():
    from nmtpipe.pipelines.cli.main import COMMANDS, RUNS_BEAM, takes_beam

    assert {name for name in COMMANDS if takes_beam(name)} <= RUNS_BEAM <= set(COMMANDS)


def test_fairseq_and_sacrebleu_spellings_are_accepted():
    from nmtpipe.pipelines.cli.main import build_parser

    parser = build_parser()
    args, _ = parser.parse_known_args(
        ["decode", "--path", "c.pt", "--gen-subset", "valid", "--tokenize", "13a"]
    )
    assert (args.checkpoint, args.split, args.bleu_tokenize) == ("c.pt", "valid", "13a")
    args, _ = parser.parse_known_args(["decode", "--sacrebleu-tokenizer", "zh"])
    assert args.bleu_tokenize == "zh"
    args, _ = parser.parse_known_args(["vocab", "--joined-dictionary"])
    assert args.joined
    args, _ = parser.parse_known_args(["train", "--reset-dataloader"])
    assert args.reset_data


def test_missing_input_names_the_files_tried(capsys, tmp_path):
    code, _, err = run_cli(capsys, *prepare_args(tmp_path / "nope", tmp_path / "o", *IN_MEMORY))
    assert code == 1
    assert f"error: no file for {tmp_path}/nope.en: tried" in err
    assert len(err.strip().splitlines()) == 1


def test_an_output_where_a_file_is_is_one_line(capsys, small_corpus, tmp_path):
    (tmp_path / "taken").write_text("a file")
    for output, blocker in (("taken", "taken"), ("taken/prepared", "taken")):
        code, out, err = run_cli(capsys, *prepare_args(small_corpus, tmp_path / output, *IN_MEMORY))
        shown = f"{tmp_path}/{output}" + ("" if output == blocker else f": {tmp_path}/{blocker}")
        assert (code, out, err.strip().splitlines()) == (
            1,
            "",
            [f"nmtpipe prepare: error: {shown} is a file, not a folder; choose another output"],
        )


def test_an_output_on_a_missing_bucket_is_one_line_and_makes_no_bucket(capsys, small_corpus, s3):
    import s3fs

    typo = "s3://nmtpipe-tset/prepared"
    code, out, err = run_cli(capsys, *prepare_args(small_corpus, typo, *IN_MEMORY))
    assert (code, out, err.strip().splitlines()) == (
        1,
        "",
        [
            f"nmtpipe prepare: error: {typo}: the bucket nmtpipe-tset does not exist; "
            "nmtpipe creates no buckets: create it, or correct its name"
        ],
    )
    assert s3fs.S3FileSystem().ls("") == [s3.removeprefix("s3://")]


def test_an_output_on_an_unreachable_store_says_so(capsys, small_corpus, s3_unreachable):
    code, out, err = run_cli(capsys, *prepare_args(small_corpus, "s3://nmtpipe-test/p", *IN_MEMORY))
    assert (code, out, err.strip().splitlines()) == (
        1,
        "",
        [
            "nmtpipe prepare: error: s3://nmtpipe-test/p: could not look for the bucket "
            "nmtpipe-test: EndpointConnectionError: Could not connect to the endpoint URL: "
            f'"{s3_unreachable}/nmtpipe-test" (gave up after 2 attempts)'
        ],
    )


def test_an_output_on_a_bucket_denied_says_so(capsys, small_corpus, s3_denied):
    output = f"{s3_denied}/prepared"
    code, out, err = run_cli(capsys, *prepare_args(small_corpus, output, *IN_MEMORY))
    assert (code, out, err.strip().splitlines()) == (
        1,
        "",
        [
            f"nmtpipe prepare: error: {output}: access to the bucket nmtpipe-denied is denied "
            "(Forbidden): use credentials that may list and write it, or correct its name"
        ],
    )


@pytest.mark.parametrize("runner", [IN_MEMORY, MULTI_PROCESS], ids=["in-memory", "processes"])
@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gz"])
def test_misaligned_corpus_is_one_line_and_commits_nothing(capsys, tmp_path, runner, compressed):
    ext = ".gz" if compressed else ""
    pack = gzip.compress if compressed else (lambda b: b)
    (tmp_path / f"train.en{ext}").write_bytes(pack(b"one\ntwo\nthree\n"))
    (tmp_path / f"train.zh{ext}").write_bytes(pack("一\n二\n".encode()))
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, *prepare_args(tmp_path / "train", out, *runner))
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        f"nmtpipe prepare: error: {tmp_path}/train.en{ext} has 3 lines but "
        f"{tmp_path}/train.zh{ext} has 2"
    )
    assert "Traceback" not in err
    assert not out.exists()  # nor an empty output folder


def test_the_terminal_sees_one_line_even_from_worker_processes(tmp_path):
    # Worker processes write to the terminal directly (file descriptor 2), below capsys.
    (tmp_path / "t.en").write_bytes(b"a\nb\nc\n")
    (tmp_path / "t.zh").write_bytes(b"x\ny\n")
    proc = subprocess.run(
        [*NMTPIPE, *prepare_args(tmp_path / "t", tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1
    said = proc.stderr.splitlines()
    progress, error = said[0], said[-1]
    # Between them only the job's progress: in a log, its input read so far.
    assert [line for line in said[1:-1] if "Prepare on FnApiRunner: " not in line] == []
    # What it will do, and where (after the time, in a log).
    progress = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", progress)
    assert progress.startswith(
        f"preparing 1 input(s) into {tmp_path}/out (1 train, 1 valid, 1 test shard(s)) on "
        "FnApiRunner ("
    )
    assert progress.endswith(" MB input)")
    assert error == f"nmtpipe prepare: error: {tmp_path}/t.en has 3 lines but {tmp_path}/t.zh has 2"


def test_verbose_shows_the_traceback(capsys, tmp_path):
    code, _, err = run_cli(
        capsys,
        "prepare",
        "-s",
        "en",
        "-t",
        "en",
        "--trainpref",
        "x",
        "--output",
        "o",
        "-v",
    )
    assert code == 2 and "Traceback" in err and "must differ" in err


def test_example_demo_runs_from_the_console_script(tmp_path):
    # The README's main command, as a user runs it (default runner: worker processes).
    def nmtpipe(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [*NMTPIPE, *args], capture_output=True, text=True, timeout=300, check=False
        )
        assert proc.returncode == 0, proc.stderr
        return proc

    def results(proc: subprocess.CompletedProcess) -> dict:
        # One contract for every command: stdout holds one JSON document, its result.
        document = json.loads(proc.stdout)
        assert document["command"] == proc.args[len(NMTPIPE)]
        return document["result"]

    prepare = ["prepare", "--example", "--split-key", "src", "--test-fraction", "0.02",
               "--output", str(tmp_path / "prepared")]  # fmt: skip
    first = nmtpipe(*prepare)
    assert results(first)["stats"]["splits"]["test"] == 617 and not results(first)["cached"]
    assert "kept" in first.stderr and "train" in first.stderr and "test 617" in first.stderr
    assert "Prepare on FnApiRunner" in first.stderr  # the Beam step's progress line
    again = nmtpipe(*prepare, "--quiet")
    assert results(again)["cached"] and again.stderr.startswith("cached:")
    assert "Prepare on" not in again.stderr
    vocab = nmtpipe(
        "vocab", "--prepared", str(tmp_path / "prepared"), "--model", "unigram",
        "--vocab-size", "4000", "--joined", "--byte-fallback", "--normalization-rule", "identity",
        "--output", str(tmp_path / "vocab"),
    )  # fmt: skip
    assert vocab.stderr.splitlines()[-1].split()[:4] == ["joined", "unigram", "4,000", "entries"]
    assert results(vocab)["vocabularies"]["joined"]["vocab_size"] == 4000
    assert sorted(p.name for p in (tmp_path / "vocab").iterdir()) == [
        "dict.en.txt",
        "dict.zh.txt",
        "manifest.json",
        "spm.model",
        "spm.vocab",
        "tokenizer.json",
    ]
    encode = nmtpipe(
        "encode", "--prepared", str(tmp_path / "prepared"), "--vocab", str(tmp_path / "vocab"),
        "--output", str(tmp_path / "encoded"),
    )  # fmt: skip
    assert "test         617 pairs" in encode.stderr and "(0.0% <unk>" in encode.stderr
    assert results(encode)["stats"]
    bins = sorted(p.name for p in (tmp_path / "encoded" / "fairseq").glob("*.bin"))
    assert bins[:2] == ["test.en-zh.en.bin", "test.en-zh.zh.bin"] and len(bins) == 6
    assert len(list((tmp_path / "encoded" / "arrow").glob("*.arrow"))) == 3
    train = nmtpipe(
        "train", "--data", str(tmp_path / "encoded"), "--save-dir", str(tmp_path / "ckpt"),
        "--max-tokens", "2048", "--max-update", "10", "--log-interval", "5",
    )  # fmt: skip
    assert "trained to update 10" in train.stderr
    assert [r["update"] for r in train_records(tmp_path / "ckpt") if "loss" in r] == [5, 10]
    assert results(train)["updates"] == 10
    assert (tmp_path / "ckpt" / "checkpoint_last.pt").exists()
    # Short hypotheses: a model of 10 updates would babble to the length limit.
    decode = nmtpipe(
        "decode", "--checkpoint", str(tmp_path / "ckpt" / "checkpoint_last.pt"),
        "--output", str(tmp_path / "decoded"), "--max-len-a", "0", "--max-len-b", "6",
    )  # fmt: skip
    assert "translated 617 sentences" in decode.stderr and results(decode)["sentences"] == 617
    assert "decode: 100%" in decode.stderr  # the progress display's last line
    assert "BLEU = " in decode.stderr and "chrF2 = " in decode.stderr
    hypotheses = (tmp_path / "decoded" / "hypotheses.txt").read_text(encoding="utf-8")
    assert hypotheses.count("\n") == 617


def test_vocab_errors_are_one_line(capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "vocab", "--prepared", str(tmp_path / "none"), "--output", str(tmp_path / "v")
    )
    assert code == 1
    assert err.strip().splitlines() == [
        f"nmtpipe vocab: error: --prepared {tmp_path}/none holds no committed prepare output "
        "(no manifest.json); run nmtpipe prepare first"
    ]
    with pytest.raises(SystemExit) as exit_:
        main(["vocab", "--prepared", "p", "--output", "v", "--model", "wp"])
    assert exit_.value.code == 2 and "invalid choice: 'wp'" in capsys.readouterr().err
    # A value its option cannot parse is argparse's error, as a wrong type is.
    with pytest.raises(SystemExit) as exit_:
        main(["vocab", "--prepared", "p", "--output", "v", "--min-count-range", "5"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --min-count-range: wants two integers" in err


def test_a_killed_run_leaves_no_manifest_and_the_rerun_succeeds(tmp_path):
    en = example_lines("tatoeba-cmn", "en")[::2]
    zh = example_lines("tatoeba-cmn", "zh")[::2]
    corpus = write_pair(tmp_path / "big", en * 4, zh * 4)  # 64k lines: a few seconds
    out = tmp_path / "out"
    args = [*NMTPIPE, *prepare_args(corpus, out)]
    proc = subprocess.Popen(
        args, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not (out / ".nmtpipe").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    time.sleep(0.5)  # let it get some files written
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "manifest.json").exists()
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "manifest.json").exists()
    assert not (out / ".nmtpipe").exists()  # the killed run's leftovers went with the commit
    assert not [p for p in Path(out).rglob("*") if ".tmp-" in p.name]


# Runs `nmtpipe` in-process with a fairseq writer that kills the process right after
# writing its first batch: the job dies with shard files half-written.
_DIE_MID_WRITE = """
import os, signal, sys
from nmtpipe.transforms.formats import fairseq_mmap as mmap_format
from nmtpipe.pipelines.cli.main import main

add_batch = mmap_format.MMapWriter.add_batch

def add_batch_then_die(self, flat, lengths):
    add_batch(self, flat, lengths)
    self._data.flush()
    os.kill(os.getpid(), signal.SIGKILL)

mmap_format.MMapWriter.add_batch = add_batch_then_die
sys.exit(main(sys.argv[1:]))
"""


def test_an_encode_killed_mid_write_commits_nothing_and_reruns(capsys, small_corpus, tmp_path):
    prepared, vocab, out = tmp_path / "prepared", tmp_path / "vocab", tmp_path / "encoded"
    assert (
        run_cli(capsys, *prepare_args(small_corpus, prepared, "--num-shards", "2"), *IN_MEMORY)[0]
        == 0
    )
    assert run_cli(
        capsys, "vocab", "--prepared", str(prepared), "--vocab-size", "300", "--joined",
        "--output", str(vocab), *IN_MEMORY,
    )[0] == 0  # fmt: skip
    args = ["encode", "--prepared", str(prepared), "--vocab", str(vocab), "--output", str(out)]
    killed = subprocess.run(
        [sys.executable, "-c", _DIE_MID_WRITE, *args, *IN_MEMORY],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    assert [p.name for p in out.rglob("*.bin.tmp-*")]  # it died with a .bin half-written
    assert not (out / "manifest.json").exists()
    assert not list(out.rglob("*.bin"))  # nothing half-written under a reader's name
    rerun = subprocess.run(
        [*NMTPIPE, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "manifest.json").exists()
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name or p.name == ".nmtpipe"]
    from nmtpipe.transforms.formats.encoded_dataset import open_dataset

    assert len(open_dataset(str(out), "fairseq")["train"]) == len(open_dataset(str(out))["train"])


def test_encode_errors_are_one_line(capsys, tmp_path):
    code, _, err = run_cli(capsys, "encode", "--prepared", "p", "--output", "o")
    assert (code, err) == (2, "nmtpipe encode: error: --vocab is required\n")  # the one missing
    code, _, err = run_cli(
        capsys, "encode", "--prepared", "p", "--vocab", "v", "--output", "o", "--formats", "csv"
    )
    assert code == 2 and "--formats takes one or more of arrow,fairseq, not csv" in err


def test_decode_says_what_its_counts_out_of_the_ordinary_mean():
    from nmtpipe.pipelines.cli.commands.decode import report

    speed = {"seconds": 5.0, "sentences_per_s": 126.0, "target_tokens_per_s": 900.0}
    counts = {"sentences": 630, "world": 1, "truncated": 0, "skipped": 2, "unfinished": 128}
    summary = {**speed, **counts}
    assert report(summary).endswith(
        "; 2 skipped (longer than --max-source-positions: an empty line), 128 unfinished "
        "(no EOS within --max-len-a * source length + --max-len-b tokens: cut there)"
    )
