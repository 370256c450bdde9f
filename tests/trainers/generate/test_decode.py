"""`nmtpipe decode`: a split or raw text, one rank or two, scored, bad input refused."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import sacrebleu
import torch

from nmtpipe.pipelines.cli.main import main
from nmtpipe.trainers.generate.decode import Decoder, Shown
from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.transforms.formats.encoded_dataset import open_dataset
from tests.helpers import example_lines, write_foreign_checkpoint
from tests.terminal import Terminal, lines

NMTPIPE = [sys.executable, "-m", "nmtpipe"]
SHORT = ["--max-len-a", "1", "--max-len-b", "5"]  # keeps an untrained model's beams short


@pytest.fixture
def trained(tiny_model) -> dict[str, str]:
    return tiny_model


def decode(trained, output: Path, *more: str) -> int:
    return main(["decode", "--checkpoint", trained["checkpoint"], "--output", str(output), *more])


def outputs(folder: Path) -> tuple[list[str], list[dict], dict]:
    hyps = (folder / "hypotheses.txt").read_text(encoding="utf-8").split("\n")[:-1]
    nbest = [
        json.loads(x) for x in (folder / "nbest.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return hyps, nbest, json.loads((folder / "scores.json").read_text(encoding="utf-8"))


def test_a_split_is_translated_in_order_and_scored(trained, tmp_path, capsys):
    assert decode(trained, tmp_path / "out", "--nbest", "2", "--max-tokens", "64") == 0
    printed = capsys.readouterr().err
    hyps, nbest, scores = outputs(tmp_path / "out")
    data = open_dataset(trained["encoded"])
    assert len(hyps) == len(nbest) == len(data["test"]) == scores["sentences"] > 10
    assert [r["id"] for r in nbest] == list(range(len(hyps)))
    assert [r["hypotheses"][0]["text"] for r in nbest] == hyps
    assert all(len(r["hypotheses"]) == 2 for r in nbest)
    # References are the prepared target texts, in the encoded split's order.
    refs = [r["reference"] for r in nbest]
    assert refs == _prepared_column(trained["prepared"], "test", "tgt")
    bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize="zh")
    chrf = sacrebleu.corpus_chrf(hyps, [refs])
    assert scores["bleu"] == round(bleu.score, 2) and scores["chrf"] == round(chrf.score, 2)
    assert "tok:zh" in scores["bleu_signature"]
    assert f"BLEU = {bleu.score:.2f}" in printed and f"chrF2 = {chrf.score:.2f}" in printed
    assert scores["sentences_per_s"] > 0 and scores["target_tokens_per_s"] > 0
    # The job's results are the search's on each sentence alone (batches change nothing).
    state = checkpoint.load(trained["checkpoint"])
    search = BeamSearch(checkpoint.model_from(state), data.layout, SearchConfig(nbest=2))
    for i in (0, len(hyps) // 2, len(hyps) - 1):
        alone = search(torch.from_numpy(data["test"][i][0].astype("int64"))[None])[0]
        assert [h["score"] for h in nbest[i]["hypotheses"]] == [
            pytest.approx(h.score, abs=1e-3) for h in alone
        ]


def _prepared_column(prepared: str, split: str, column: str) -> list[str]:
    manifest = json.loads((Path(prepared) / "manifest.json").read_text())
    values: list[str] = []
    for path in manifest["splits"][split]["files"]:
        values += pq.read_table(Path(prepared) / path, columns=[column]).column(column).to_pylist()
    return values


def test_two_ranks_write_what_one_rank_writes(trained, tmp_path):
    args = ["--max-tokens", "48", "--buffer-size", "7", "--beam", "3", *SHORT]
    assert decode(trained, tmp_path / "one", *args) == 0
    two = subprocess.run(
        [*NMTPIPE, "decode", "--checkpoint", trained["checkpoint"], "--output",
         str(tmp_path / "two"), *args, "--nproc", "2"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert two.returncode == 0, two.stderr[-3000:]
    one_hyps, one_nbest, one_scores = outputs(tmp_path / "one")
    two_hyps, two_nbest, two_scores = outputs(tmp_path / "two")
    assert two_hyps == one_hyps and two_scores["world"] == 2
    assert [r["id"] for r in two_nbest] == [r["id"] for r in one_nbest]
    assert two_scores["bleu"] == one_scores["bleu"]


def test_raw_text_gets_what_the_split_got(trained, tmp_path):
    sources = _prepared_column(trained["prepared"], "test", "src")
    refs = _prepared_column(trained["prepared"], "test", "tgt")
    with gzip.open(tmp_path / "input.en.gz", "wb") as f:  # compressed, CRLF line ends
        f.write("".join(line + "\r\n" for line in sources).encode())
    (tmp_path / "ref.zh").write_text("".join(line + "\n" for line in refs), encoding="utf-8")
    assert decode(trained, tmp_path / "split", *SHORT) == 0
    assert decode(trained, tmp_path / "raw", *SHORT, "--input", str(tmp_path / "input.en.gz"),
                  "--reference", str(tmp_path / "ref.zh")) == 0  # fmt: skip
    split_hyps, _, split_scores = outputs(tmp_path / "split")
    raw_hyps, raw_nbest, raw_scores = outputs(tmp_path / "raw")
    assert raw_hyps == split_hyps and raw_scores["bleu"] == split_scores["bleu"]
    assert [r["source"] for r in raw_nbest] == sources


def test_over_long_inputs_are_truncated_or_skipped_and_counted(trained, tmp_path, capsys):
    text = tmp_path / "in.en"
    text.write_text("Tom is here.\n" + "very " * 200 + "long.\nHello!\n", encoding="utf-8")
    common = ["--input", str(text), "--max-source-positions", "12", *SHORT]
    assert decode(trained, tmp_path / "t", *common) == 0
    hyps, nbest, scores = outputs(tmp_path / "t")
    assert len(hyps) == 3 and scores["truncated"] == 1 and nbest[1]["input"] == "truncated"
    assert "bleu" not in scores  # no references, no scores
    # What was translated is counted, scored or not (it once said "translated 0").
    assert scores["sentences"] == 3 and scores["scored_sentences"] == 0
    assert "translated 3 sentences" in capsys.readouterr().err
    assert decode(trained, tmp_path / "s", *common, "--skip-invalid-size-inputs") == 0
    hyps, nbest, scores = outputs(tmp_path / "s")
    assert scores["skipped"] == 1 and hyps[1] == "" and nbest[1]["hypotheses"] == []
    assert hyps[0] and hyps[2]


def test_bad_input_is_refused_with_the_file_named(trained, tmp_path, capsys):
    empty = tmp_path / "empty.en"
    empty.write_bytes(b"")
    assert decode(trained, tmp_path / "o", "--input", str(empty)) == 1
    assert f"{empty}: nothing to translate" in capsys.readouterr().err
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"fine\nnot \xff utf-8\n")
    assert decode(trained, tmp_path / "o", "--input", str(bad)) == 1
    assert f"{bad}:2: not UTF-8" in capsys.readouterr().err
    ref = tmp_path / "ref.zh"
    ref.write_text("one\n", encoding="utf-8")
    good = tmp_path / "good.en"
    good.write_text("a\nb\n", encoding="utf-8")
    assert decode(trained, tmp_path / "o", "--input", str(good), "--reference", str(ref)) == 1
    assert "one reference line is needed per input line" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # A checkpoint of another vocabulary.
    state = checkpoint.load(trained["checkpoint"])
    state["vocab_fingerprint"] = "0" * 64
    other = tmp_path / "other.pt"
    checkpoint.save(str(other), state)
    code = main(["decode", "--checkpoint", str(other), "--output", str(tmp_path / "o")])
    assert code == 1 and "was trained with another vocabulary" in capsys.readouterr().err
    assert decode(trained, tmp_path / "o", "--split", "nope") == 2  # a usage mistake
    assert "has no split 'nope'" in capsys.readouterr().err
    assert decode(trained, tmp_path / "o", "--beam", "2", "--nbest", "3") == 2


def test_an_unsafe_checkpoint_is_one_line_and_leaves_no_output(tmp_path, capsys):
    foreign = tmp_path / "foreign.pt"
    named = write_foreign_checkpoint(foreign)
    (tmp_path / "there").mkdir()
    (tmp_path / "there" / "notes.txt").write_text("mine")
    for output in (tmp_path / "new" / "out", tmp_path / "there"):
        assert main(["decode", "--checkpoint", str(foreign), "--output", str(output)]) == 1
        loading, line = capsys.readouterr().err.splitlines()
        assert loading.endswith(f" loading the checkpoint {foreign}")  # (a log's line)
        assert line.startswith(
            f"nmtpipe decode: error: {foreign} holds Python objects beyond tensors and plain "
            f"values ({named}), which nmtpipe does not load"
        )
        assert "\x1b" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.pt", "there"]
    assert [p.name for p in (tmp_path / "there").iterdir()] == ["notes.txt"]


def test_a_failed_run_leaves_no_outputs_and_a_rerun_replaces_them(trained, tmp_path, monkeypatch):
    from nmtpipe.trainers.generate.decode import Decoder

    out = tmp_path / "out"
    assert decode(trained, out, *SHORT) == 0
    first = outputs(out)
    original = Decoder._decode_window
    calls = []

    def fail_on_second(self, window):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk gone")
        return original(self, window)

    monkeypatch.setattr(Decoder, "_decode_window", fail_on_second)
    assert decode(trained, out, *SHORT, "--beam", "2", "--buffer-size", "5") == 1
    # The old outputs' commit mark is gone and no half-written file took their names.
    assert not (out / "scores.json").exists()
    assert (out / "hypotheses.txt").read_text(encoding="utf-8").split("\n")[:-1] == first[0]
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    monkeypatch.setattr(Decoder, "_decode_window", original)
    assert decode(trained, out, *SHORT, "--beam", "2") == 0
    assert outputs(out)[2]["search"]["beam"] == 2


def test_outputs_go_to_object_storage(trained, s3, tmp_path):
    import s3fs

    assert decode(trained, f"{s3}/decoded", *SHORT) == 0
    assert decode(trained, tmp_path / "local", *SHORT) == 0
    remote = s3fs.S3FileSystem()
    local = tmp_path / "local"
    assert (
        remote.cat("nmtpipe-test/decoded/hypotheses.txt") == (local / "hypotheses.txt").read_bytes()
    )
    scores = json.loads(remote.cat("nmtpipe-test/decoded/scores.json"))
    assert scores["bleu"] == json.loads((local / "scores.json").read_text())["bleu"]


NEWS = 40  # lines of the news set the progress tests translate


def _news(folder: Path) -> Path:
    path = folder / "news.en"
    path.write_text("\n".join(example_lines("ntrex128-enzh", "en", NEWS)) + "\n", "utf-8")
    return path


def test_decode_shows_its_total_from_the_first_second_on_a_terminal(trained, tmp_path):
    """The count of input lines, in the bar before the checkpoint loads; the stages of
    the start said; rate and ETA as it goes."""
    terminal = Terminal([*NMTPIPE, "decode", "--checkpoint", trained["checkpoint"], "--input",
                         str(_news(tmp_path)), "--output", str(tmp_path / "o"), *SHORT],
                        tmp_path)  # fmt: skip
    assert terminal.wait() == 0
    seen = terminal.output()
    assert seen.index(f"0/{NEWS}") < seen.index(f"loading the checkpoint {trained['checkpoint']}")
    assert f"{NEWS}/{NEWS}" in seen and "sentence/s" in seen
    assert lines(seen)[-1].startswith(f"translated {NEWS} sentences")


def test_decode_writes_time_stamped_lines_to_a_log(trained, tmp_path):
    done = subprocess.run([*NMTPIPE, "decode", "--checkpoint", trained["checkpoint"], "--input",
                           str(_news(tmp_path)), "--output", str(tmp_path / "o"), *SHORT],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    stamped = [
        line.split(" ", 2)[2] for line in done.stderr.splitlines()
        if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line)
    ]  # fmt: skip
    assert stamped[0].startswith("decode:   0%") and f"0/{NEWS}" in stamped[0]
    assert stamped[1] == f"loading the checkpoint {trained['checkpoint']}"
    assert stamped[-1].startswith("decode: 100%") and f"{NEWS}/{NEWS}" in stamped[-1]


class Counted(Shown):
    """The first rank's display, counting what each update moved the bar by."""

    def __init__(self) -> None:
        super().__init__(main=True)
        self.total: int | None = None
        self.moves: list[int] = []

    def start(self, total: int | None) -> None:
        self.total = self.total if total is None else total

    def update(self, n: int) -> None:
        self.moves.append(n)


def test_the_bar_moves_with_every_batch(trained, tmp_path):
    from nmtpipe.trainers.generate.decode_config import DecodeConfig
    from nmtpipe.trainers.runtime.distributed import Ranks

    config = DecodeConfig(checkpoint=trained["checkpoint"], output=str(tmp_path / "o"),
                          inputs=(str(_news(tmp_path)),), max_tokens=64,
                          search=SearchConfig(max_len_a=1, max_len_b=5))  # fmt: skip
    shown = Counted()
    Decoder(config, Ranks(), shown).run()
    assert shown.total == NEWS and sum(shown.moves) == NEWS
    assert len([n for n in shown.moves if n]) > 3  # a move per batch, not per window
