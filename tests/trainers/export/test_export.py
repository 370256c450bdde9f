"""`nmtpipe export` and `nmtpipe translate`: parity of the Transformers and CTranslate2
exports with nmtpipe on a tiny trained model, refusals, streaming translation."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nmtpipe.pipelines.cli.main import main
from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from nmtpipe.trainers.data.decode_inputs import SourceText, _prepared_texts
from nmtpipe.trainers.export import export
from nmtpipe.trainers.export.export_config import ExportConfig
from nmtpipe.trainers.export.marian_weights import check_exportable
from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.runtime import checkpoint, run_files
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.formats.encoded_dataset import open_dataset
from nmtpipe.transforms.vocab.kinds.hf_vocab import HfConfig
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig
from tests.helpers import IN_MEMORY, prepare_example

transformers = pytest.importorskip("transformers")
ctranslate2 = pytest.importorskip("ctranslate2")

NMTPIPE = [sys.executable, "-m", "nmtpipe"]
MAX_LEN_B = 12  # keeps an undertrained model's search short; the same limit for all three
SEARCH = SearchConfig(beam=4, lenpen=1.0, max_len_a=0, max_len_b=MAX_LEN_B)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("export")
    prepared = prepare_example(folder, 6, valid_fraction=0.02, test_fraction=0.03)
    vocab, encoded = str(folder / "vocab"), str(folder / "encoded")
    spm = SpmConfig(character_coverage=0.98)
    run_vocab(VocabConfig(prepared, vocab, "unigram", 1000, joined=True, spm=spm), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, encoded), IN_MEMORY)
    code = main([
        "train", "--data", encoded, "--save-dir", str(folder / "ckpt"), "--arch",
        "transformer_tiny", "--max-tokens", "1024", "--max-update", "60", "--lr", "3e-3",
        "--warmup-updates", "5", "--validate-interval-updates", "60",
        "--save-interval-updates", "60",
    ])  # fmt: skip
    assert code == 0
    ckpt = str(folder / "ckpt" / run_files.BEST)
    hf, ct2 = str(folder / "hf"), str(folder / "ct2")
    assert main(["export", "--checkpoint", ckpt, "--output", hf]) == 0
    assert main(["export", "--checkpoint", ckpt, "--format", "ctranslate2", "--output", ct2]) == 0
    return {"prepared": prepared, "encoded": encoded, "checkpoint": ckpt, "hf": hf, "ct2": ct2,
            "folder": str(folder)}  # fmt: skip


def _test_split(trained):
    data = open_dataset(trained["encoded"], "arrow")
    split = data["test"]
    pairs = [split[i] for i in range(len(split))]
    texts = list(_prepared_texts(data.manifest, "test"))
    return data, pairs, texts


def test_the_tokenizer_gives_the_encoded_ids_of_every_test_sentence(trained):
    tokenizer = transformers.AutoTokenizer.from_pretrained(trained["hf"])
    _, pairs, texts = _test_split(trained)
    assert len(pairs) == len(texts) > 20
    for (src, tgt), (src_text, tgt_text) in zip(pairs, texts, strict=True):
        assert tokenizer(src_text).input_ids == src.tolist()
        assert tokenizer(text_target=tgt_text).input_ids == tgt.tolist()


def test_teacher_forced_log_probabilities_match(trained):
    model = checkpoint.model_from(checkpoint.load(trained["checkpoint"]))
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(trained["hf"]).eval()
    data, pairs, _ = _test_split(trained)
    pad, eos = data.layout.pad, data.layout.eos
    width = max(max(s.size, t.size) for s, t in pairs)
    src = torch.full((len(pairs), width), pad)
    tgt = torch.full((len(pairs), width), pad)
    for row, (s, t) in enumerate(pairs):
        src[row, : s.size], tgt[row, : t.size] = (
            torch.from_numpy(s.astype(np.int64)),
            torch.from_numpy(t.astype(np.int64)),
        )
    prev = torch.cat([torch.full((len(pairs), 1), eos), tgt[:, :-1]], 1)
    with torch.no_grad():
        ours = model(src, prev).log_softmax(-1)
        theirs = hf(input_ids=src, attention_mask=src != pad, decoder_input_ids=prev).logits
    theirs = theirs.log_softmax(-1)
    real = (tgt != pad)[:, :, None]
    assert float(((ours - theirs).abs() * real).max()) < 1e-4


def _ours(trained, pairs) -> list[list[int]]:
    model = checkpoint.model_from(checkpoint.load(trained["checkpoint"]))
    data = open_dataset(trained["encoded"], "arrow")
    search = BeamSearch(model, data.layout, SEARCH)
    found = []
    for s, _ in pairs:
        found += [search(torch.from_numpy(s.astype(np.int64))[None])[0][0].tokens]
    return found


def test_generate_and_ctranslate2_find_what_nmtpipe_finds(trained):
    _, pairs, texts = _test_split(trained)
    ours = _ours(trained, pairs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(trained["hf"])
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(trained["hf"]).eval()
    generation = hf.generation_config
    assert (generation.num_beams, generation.length_penalty, generation.early_stopping) == (
        4,
        1.0,
        True,
    )
    translator = ctranslate2.Translator(trained["ct2"], device="cpu")
    same_hf = same_ct2 = 0
    for expected, (src_text, _) in zip(ours, texts, strict=True):
        batch = tokenizer([src_text], return_tensors="pt")
        with torch.no_grad():
            out = hf.generate(**batch, max_new_tokens=MAX_LEN_B + 1)[0, 1:].tolist()
        same_hf += out[: out.index(2) if 2 in out else len(out)] == expected
        tokens = tokenizer.convert_ids_to_tokens(batch.input_ids[0])
        result = translator.translate_batch([tokens], beam_size=4, length_penalty=1.0,
                                            max_decoding_length=MAX_LEN_B + 1)  # fmt: skip
        same_ct2 += tokenizer.convert_tokens_to_ids(result[0].hypotheses[0]) == expected
    assert same_hf >= 0.99 * len(ours)
    assert same_ct2 >= 0.99 * len(ours)


def test_translate_writes_what_decode_writes_with_either_engine(trained, tmp_path):
    _, _, texts = _test_split(trained)
    source = tmp_path / "src.en"
    source.write_text("".join(s + "\n" for s, _ in texts), encoding="utf-8")
    flags = ["--beam", "4", "--lenpen", "1.0", "--max-len-a", "0", "--max-len-b", str(MAX_LEN_B)]
    assert main(["decode", "--checkpoint", trained["checkpoint"], "--input", str(source),
                 "--output", str(tmp_path / "dec"), *flags]) == 0  # fmt: skip
    decoded = (tmp_path / "dec" / "hypotheses.txt").read_text(encoding="utf-8")
    ours = subprocess.run([*NMTPIPE, "translate", "--checkpoint", trained["checkpoint"], *flags,
                           "--max-tokens", "64"], input=source.read_bytes(), capture_output=True,
                          check=True)  # fmt: skip
    assert ours.stdout.decode("utf-8") == decoded
    ct2 = subprocess.run([*NMTPIPE, "translate", "--engine", "ctranslate2", "--model",
                          trained["ct2"], "--input", str(source), *flags],
                         capture_output=True, check=True)  # fmt: skip
    lines = ct2.stdout.decode("utf-8").split("\n")
    same = sum(a == b for a, b in zip(lines, decoded.split("\n"), strict=True))
    assert same >= 0.99 * len(lines)


@pytest.mark.parametrize("engine", ["nmtpipe", "ctranslate2"])
def test_translate_loads_the_export_extra_only_for_the_ctranslate2_engine(
    trained, tmp_path, engine
):
    """The import contracts let `nmtpipe translate` reach the export room indirectly; in a
    process of its own, its nmtpipe engine loads neither transformers nor ctranslate2."""
    source = tmp_path / "src.en"
    source.write_text("I like tea.\n", encoding="utf-8")
    model = (["--checkpoint", trained["checkpoint"]] if engine == "nmtpipe" else
             ["--engine", "ctranslate2", "--model", trained["ct2"], "--lenpen", "1.0"])  # fmt: skip
    # -X importtime: a line on stderr for every module the process imports, when it does.
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "nmtpipe", "translate",
                           *model, "--input", str(source)], capture_output=True, text=True,
                          check=True)  # fmt: skip
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    if engine == "nmtpipe":
        assert not imported & {"transformers", "ctranslate2"}
    else:  # what the check sees where the extra is loaded
        assert "ctranslate2" in imported


def test_a_blank_line_translates_to_a_blank_line_with_every_engine(trained, tmp_path, capsys):
    lines = ["I like tea.", "", "   ", "Where is the station?"]
    flags = ["--beam", "4", "--lenpen", "1.0", "--max-len-a", "0", "--max-len-b", str(MAX_LEN_B)]
    outputs = {}
    for name, text in (("with", lines), ("without", [lines[0], lines[3]])):
        source = tmp_path / f"{name}.en"
        source.write_text("".join(line + "\n" for line in text), encoding="utf-8")
        for engine in (["--checkpoint", trained["checkpoint"]],
                       ["--engine", "ctranslate2", "--model", trained["ct2"]]):  # fmt: skip
            capsys.readouterr()
            assert main(["translate", *engine, "--input", str(source), *flags]) == 0
            outputs[name, engine[0]] = capsys.readouterr().out.split("\n")[:-1]
        assert main(["decode", "--checkpoint", trained["checkpoint"], "--input", str(source),
                     "--output", str(tmp_path / name), *flags]) == 0  # fmt: skip
        decoded = (tmp_path / name / run_files.HYPOTHESES).read_text(encoding="utf-8")
        outputs[name, "decode"] = decoded.split("\n")[:-1]
    for engine in ("--checkpoint", "--engine", "decode"):
        first, blank, spaces, last = outputs["with", engine]
        assert blank == spaces == ""
        assert [first, last] == outputs["without", engine]


def test_a_typed_line_is_answered_before_the_input_ends(trained):
    proc = subprocess.Popen([*NMTPIPE, "translate", "--checkpoint", trained["checkpoint"],
                             "--max-len-b", "5", "--nbest", "2", "--beam", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"I like tea.\n")
    proc.stdin.flush()
    first = [proc.stdout.readline(), proc.stdout.readline()]  # answered while stdin is open
    proc.stdin.write(b"Where is the station?\n")
    proc.stdin.close()
    rest = proc.stdout.read().decode().splitlines()
    assert proc.wait() == 0
    assert [line.split(b"\t")[0] for line in first] == [b"0", b"0"]
    assert [line.split("\t")[0] for line in rest] == ["1", "1"]
    assert float(first[0].split(b"\t")[1]) >= float(first[1].split(b"\t")[1])


def test_bad_input_names_the_line(trained, capsys):
    bad = Path(trained["folder"]) / "bad.en"
    bad.write_bytes(b"fine\n\xff\xfe\n")
    code = main(["translate", "--checkpoint", trained["checkpoint"], "--input", str(bad)])
    assert code != 0
    assert f"{bad}:2: not UTF-8" in capsys.readouterr().err


def test_a_damaged_or_foreign_model_folder_is_one_line_naming_it(trained, tmp_path, capsys):
    source = tmp_path / "src.en"
    source.write_text("I like tea.\n", encoding="utf-8")

    def translate(model: Path) -> str:
        capsys.readouterr()
        args = ["translate", "--engine", "ctranslate2", "--model", str(model), "--lenpen", "1"]
        assert main([*args, "--input", str(source)]) == 1
        return capsys.readouterr().err.strip().splitlines()[-1]

    damaged = tmp_path / "damaged"
    shutil.copytree(trained["ct2"], damaged)
    weights = damaged / "model.bin"
    data = weights.read_bytes()
    weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, one bit changed
    assert translate(damaged).startswith(f"nmtpipe translate: error: {damaged}/model.bin is "
                                         "corrupted: its sha256 is ")  # fmt: skip
    weights.write_bytes(weights.read_bytes()[:100])
    assert translate(damaged).startswith(
        f"nmtpipe translate: error: {damaged}/model.bin has 100 bytes, the manifest says "
    )
    (damaged / "manifest.json").unlink()
    assert translate(damaged) == (
        f"nmtpipe translate: error: {damaged} holds no committed export output (no "
        "manifest.json); run nmtpipe export first"
    )
    assert translate(Path(trained["hf"])) == (
        f"nmtpipe translate: error: {trained['hf']} holds a hf export; --engine ctranslate2 "
        "reads one made with --format ctranslate2"
    )
    missing = tmp_path / "nowhere.pt"
    assert main(["export", "--checkpoint", str(missing), "--output", str(tmp_path / "x")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"nmtpipe export: error: no checkpoint at {missing}"
    )


def test_the_export_is_committed_cached_and_described(trained, capsys):
    doc = json.loads((Path(trained["hf"]) / "manifest.json").read_text())
    names = {f["path"] for f in doc["files"]}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
            "tokenizer_config.json", "README.md"} <= names  # fmt: skip
    assert {"model.bin", "tokenizer.json", "README.md"} <= {
        f["path"] for f in json.loads((Path(trained["ct2"]) / "manifest.json").read_text())["files"]
    }
    card = (Path(trained["hf"]) / "README.md").read_text()
    assert "pipeline_tag: translation" in card and "test:" in card and "unigram" in card
    assert main(["export", "--checkpoint", trained["checkpoint"], "--output", trained["hf"]]) == 0
    files = ", ".join(sorted(names))
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"cached: {trained['hf']} already holds the hf model of {trained['checkpoint']}: {files}"
    )


def test_the_report_names_what_was_exported_and_where():
    from nmtpipe.pipelines.cli.commands.export import shown

    result = {"format": "ctranslate2", "options": {"checkpoint": "runs/ckpt/checkpoint_best.pt"},
              "output": "runs/ct2", "cached": False, "seconds": 4.2,
              "files": [{"path": "model.bin"}, {"path": "README.md"}]}  # fmt: skip
    assert shown(result).report == (
        "exported the ctranslate2 model of runs/ckpt/checkpoint_best.pt into runs/ct2 in 4.2 "
        "s: model.bin, README.md"
    )


def test_int8_quantization_translates(trained, tmp_path):
    out = str(tmp_path / "int8")
    assert main(["export", "--checkpoint", trained["checkpoint"], "--format", "ctranslate2",
                 "--quantization", "int8", "--output", out]) == 0  # fmt: skip
    done = subprocess.run([*NMTPIPE, "translate", "--engine", "ctranslate2", "--model", out,
                           "--lenpen", "1", "--max-len-b", "5"], input=b"Hello.\nThanks.\n",
                          capture_output=True, check=True)  # fmt: skip
    assert len(done.stdout.decode().split("\n")) == 3


def test_models_without_an_exact_marian_twin_are_refused(trained, monkeypatch):
    state = checkpoint.load(trained["checkpoint"])
    with pytest.raises(ConfigError, match="pre-norm"):
        check_exportable({**state["model_config"], "pre_norm": True}, "transformer_tiny", "ck")
    with pytest.raises(ConfigError, match="rnn_gru"):
        check_exportable(state["model_config"], "rnn_gru", "ck")
    from nmtpipe.transforms.vocab import vocabulary

    real = vocabulary.open_vocabulary

    def as_t2t(url):
        vocab = real(url)
        return vocabulary.Vocabulary(vocab.root, {**vocab.doc, "model": "t2t"})

    monkeypatch.setattr(export, "open_vocabulary", as_t2t)
    with pytest.raises(ConfigError, match="SentencePiece"):
        export.build(ExportConfig(trained["checkpoint"], "unused"), "unused", print)
    monkeypatch.setattr(export, "open_vocabulary", real)
    converted = SourceText(script="simplified")  # sources that `prepare --zh-script` converted
    monkeypatch.setattr(export, "prepared_source_text", lambda doc, required: converted)
    with pytest.raises(ConfigError, match="converted to simplified script by prepare --zh-script"):
        export.build(ExportConfig(trained["checkpoint"], "unused"), "unused", print)


def test_a_tokenizers_vocabulary_exports_and_translates(tmp_path):
    """A byte-level BPE vocabulary from `tokenizers`: the export's tokenizer gives the
    encoded ids of every test sentence, and `translate` reads it like any other."""
    prepared = prepare_example(tmp_path, 12, valid_fraction=0.02, test_fraction=0.03)
    vocab, encoded = str(tmp_path / "vocab"), str(tmp_path / "encoded")
    hf = HfConfig(pre_tokenizer="byte-level")
    run_vocab(VocabConfig(prepared, vocab, "bpe-hf", 1000, joined=True, hf=hf), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, encoded), IN_MEMORY)
    train = ["train", "--data", encoded, "--save-dir", str(tmp_path / "ckpt"), "--arch",
             "transformer_tiny", "--max-tokens", "1024", "--max-update", "2",
             "--validate-interval-updates", "2", "--save-interval-updates", "2"]  # fmt: skip
    assert main(train) == 0
    ckpt = str(tmp_path / "ckpt" / run_files.BEST)
    assert main(["export", "--checkpoint", ckpt, "--output", str(tmp_path / "hf")]) == 0
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    data = open_dataset(encoded, "arrow")
    texts = list(_prepared_texts(data.manifest, "test"))
    assert len(texts) > 20
    for i, (src_text, tgt_text) in enumerate(texts):
        src, tgt = data["test"][i]
        assert tokenizer(src_text).input_ids == src.tolist()
        assert tokenizer(text_target=tgt_text).input_ids == tgt.tolist()
    done = subprocess.run([*NMTPIPE, "translate", "--checkpoint", ckpt, "--max-len-b", "3"],
                          input=b"Hello.\n\xe4\xbd\xa0\xe5\xa5\xbd\n", capture_output=True,
                          check=True)  # fmt: skip
    assert len(done.stdout.decode("utf-8").split("\n")) == 3
