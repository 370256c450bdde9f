"""`nmtpipe vocab` end to end on a prepared dataset: files, fairseq dicts, caching, errors."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from nmtpipe.pipelines.cli import flags
from nmtpipe.pipelines.cli.main import build_parser
from nmtpipe.pipelines.workflow.vocab import VocabConfig, VocabStep, run_vocab
from nmtpipe.transforms.errors import ConfigError, InputError, IntegrityError, OutputError
from nmtpipe.transforms.formats.prepared import read_prepared
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.vocab import counts as counts_lib
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, read_dict
from nmtpipe.transforms.vocab.kinds import hf_vocab, spm_vocab
from nmtpipe.transforms.vocab.kinds.hf_vocab import HfConfig
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig
from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
from nmtpipe.transforms.vocab.kinds.subword_build import SubwordBuilder
from nmtpipe.transforms.vocab.kinds.t2t import T2tConfig
from nmtpipe.transforms.vocab.vocabulary import open_vocabulary
from tests.helpers import IN_MEMORY, MULTI_PROCESS, example_lines, prepare_example


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return prepare_example(tmp_path_factory.mktemp("vocab"), 8, num_shards=3)


def vocab(prepared, output, beam_args=IN_MEMORY, force=False, **options):
    return run_vocab(VocabConfig(prepared, str(output), **options), list(beam_args), force=force)


def test_joined_t2t_vocabulary_from_prepares_counts(prepared, tmp_path):
    vocab(prepared, tmp_path / "v", vocab_size=2000, joined=True)
    out = tmp_path / "v"
    assert sorted(p.name for p in out.iterdir()) == [
        "dict.en.txt",
        "dict.zh.txt",
        "manifest.json",
        "vocab.subwords",
    ]
    doc = manifest.read_manifest(str(out), "nmtpipe.vocab")
    manifest.verify_files(str(out), doc, checksums=True)
    encoder = SubwordTextEncoder.from_file(str(out / "vocab.subwords"))
    # The same vocabulary the builder makes from the counts prepare committed.
    prep = manifest.read_manifest(prepared, "nmtpipe.prepare")
    counts = counts_lib.read_counts(counts_lib.count_files(str(prepared), prep, "joined")[0])
    expected, _ = SubwordBuilder(counts).build_to_target_size(2000)
    assert list(encoder.subtokens) == expected
    info = doc["vocabularies"]["joined"]
    assert abs(info["vocab_size"] - 2000) <= 20 or info["vocab_size"] == encoder.vocab_size
    assert info["bisection"][0]["min_count"] == 500 and info["min_count"] >= 1
    assert doc["special_ids"]["vocabulary"] == {
        "pad": 0,
        "eos": 1,
        "bos": None,
        "unk": None,
        "first_symbol": 2,
    }
    assert doc["special_ids"]["reserved_tokens"] == ["<pad>", "<EOS>"]
    # fairseq dicts: the subtokens after <pad> and <EOS>, in id order, counted.
    dict_en = (out / "dict.en.txt").read_text(encoding="utf-8")
    assert dict_en == (out / "dict.zh.txt").read_text(encoding="utf-8")
    symbols = [s for s, _ in read_dict(dict_en)]
    assert symbols[: encoder.vocab_size - 2] == list(encoder.subtokens[2:])
    assert (len(SPECIALS) + len(symbols)) % 8 == 0
    assert sum(c for _, c in read_dict(dict_en)) > 0


def test_per_language_vocabularies_cache_and_force(prepared, tmp_path):
    first = vocab(prepared, tmp_path / "v", vocab_size=1000)
    assert set(first.manifest["vocabularies"]) == {"en", "zh"}
    assert (tmp_path / "v" / "vocab.en.subwords").exists() and (
        tmp_path / "v" / "vocab.zh.subwords"
    ).exists()
    again = vocab(prepared, tmp_path / "v", vocab_size=1000)
    assert again.cached and again.manifest == first.manifest
    with pytest.raises(OutputError, match="already holds"):
        vocab(prepared, tmp_path / "v", vocab_size=1200)
    forced = vocab(prepared, tmp_path / "v", vocab_size=1200, force=True)
    assert not forced.cached


def test_byte_budget_sample(prepared, tmp_path):
    outcome = vocab(
        prepared,
        tmp_path / "v",
        vocab_size=300,
        t2t=T2tConfig(file_byte_budget=3000),
        beam_args=MULTI_PROCESS,
    )
    info = outcome.manifest["vocabularies"]["en"]
    assert 0 < info["sampled_lines"] < 500
    assert info["distinct_tokens"] > 0
    assert outcome.runner.startswith("FnApiRunner")  # the sample is the step's graph


def test_the_sample_is_the_steps_graph_and_counts_need_none(prepared, tmp_path):
    """A kind's sample is drawn by the step's graph, with every other Beam step's, before
    any side is built; `write` only reads it. T2T from prepare's counts draws none."""
    parts = [read_prepared(prepared)]
    counted = VocabStep(VocabConfig(prepared, str(tmp_path / "c")), parts)
    assert counted.selector is None and counted.graph(None) is None
    sampled = VocabStep(VocabConfig(prepared, str(tmp_path / "s"), model="unigram"), parts)
    graph = sampled.graph(None)
    assert (graph.columns, graph.folder, graph.selector) == (
        ["src", "tgt"],
        sampled.sampled,
        sampled.selector,
    )
    assert 0 < sampled.selector.fraction <= 1
    counts = VocabConfig(prepared, str(tmp_path / "c"), vocab_size=300)
    assert run_vocab(counts, IN_MEMORY).runner == "the driver"


def test_a_character_budget_holds_the_tokens_in_chunks_on_disk_and_changes_nothing(
    prepared, tmp_path, monkeypatch
):
    full = vocab(prepared, tmp_path / "f", vocab_size=1000)
    whole = full.manifest["vocabularies"]["zh"]
    assert whole["chunks"] == 1 and whole["count_rows"] > 0
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    budget = whole["characters"] // 4
    capped = vocab(prepared, tmp_path / "c", vocab_size=1000, t2t=T2tConfig(max_characters=budget))
    info = capped.manifest["vocabularies"]["zh"]
    assert capped.manifest["options"]["max_characters"] == budget
    assert info["chunks"] >= 4 and info["characters"] == whole["characters"]
    assert info["bisection"] == whole["bisection"]
    for name in ("vocab.en.subwords", "vocab.zh.subwords", "dict.en.txt", "dict.zh.txt"):
        assert (tmp_path / "c" / name).read_bytes() == (tmp_path / "f" / name).read_bytes()
    assert list(spill.iterdir()) == []  # the chunks' files are gone


def test_a_build_that_cannot_fit_is_refused_before_it_starts(prepared, tmp_path, monkeypatch):
    from nmtpipe.transforms.vocab import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: memory.BASE_BYTES + 8000)
    fits = 8000 // SubwordBuilder.BYTES_PER_CHARACTER
    with pytest.raises(ConfigError, match=rf"set --max-characters {fits} or less$"):
        vocab(prepared, tmp_path / "v", vocab_size=1000)
    assert not (tmp_path / "v" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("model", "trainer", "sampled"),
    [
        ("unigram", "SentencePiece", {"spm": SpmConfig(sample_sentences=2000)}),
        ("bpe-hf", "tokenizers", {"hf": HfConfig(sample_sentences=2000)}),
    ],
)
def test_a_sample_too_large_to_train_on_is_refused_before_training(
    prepared, tmp_path, monkeypatch, model, trainer, sampled
):
    from nmtpipe.transforms.vocab import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: memory.BASE_BYTES + 100_000)
    # 2,000 pairs' sentences need more than 100 kB: the message says how many fit
    with pytest.raises(ConfigError, match=rf"^{trainer} on .* set --sample-sentences \d+ or less$"):
        vocab(prepared, tmp_path / "v", model=model, vocab_size=1000, **sampled)
    assert not (tmp_path / "v" / "manifest.json").exists()


def test_sentencepiece_is_deterministic_across_runners(prepared, tmp_path):
    spm_config = SpmConfig(num_threads=2, character_coverage=0.98, sample_sentences=2000)
    a = vocab(prepared, tmp_path / "a", model="unigram", vocab_size=1500, spm=spm_config)
    vocab(
        prepared, tmp_path / "b", model="unigram", vocab_size=1500, spm=spm_config,
        beam_args=MULTI_PROCESS,
    )  # fmt: skip
    for lang in ("en", "zh"):
        model_a = fsio.read_bytes(str(tmp_path / "a" / f"spm.{lang}.model"))
        model_b = fsio.read_bytes(str(tmp_path / "b" / f"spm.{lang}.model"))
        assert model_a == model_b  # byte for byte, whichever runner drew the sample
        pieces = [p for p, _ in spm_vocab.pieces_and_scores(model_a)]
        symbols = [
            s
            for s, _ in read_dict((tmp_path / "a" / f"dict.{lang}.txt").read_text(encoding="utf-8"))
        ]
        assert symbols[: len(pieces) - 4] == pieces[4:]  # fairseq id == SentencePiece id
    assert 1000 < a.manifest["vocabularies"]["en"]["sample_sentences"] <= 2500
    assert a.manifest["special_ids"]["vocabulary"] == {
        "bos": 0,
        "pad": 1,
        "eos": 2,
        "unk": 3,
        "first_symbol": 4,
    }
    spm_config = SpmConfig(num_threads=2, character_coverage=0.98)
    joined = vocab(
        prepared, tmp_path / "j", model="bpe", vocab_size=2500, spm=spm_config, joined=True
    )
    assert (tmp_path / "j" / "spm.model").exists() and joined.manifest["model"] == "bpe"
    # each SentencePiece model also as tokenizer.json, in the manifest, with the same ids
    lines = example_lines("tatoeba-cmn", "en", 200) + example_lines("tatoeba-cmn", "zh", 200)
    for outcome, infix in ((a, ".en"), (a, ".zh"), (joined, "")):
        root = Path(outcome.output)
        kinds = {f["path"]: f["kind"] for f in outcome.manifest["files"]}
        assert kinds[f"tokenizer{infix}.json"] == "tokenizer-json"
        tok = Tokenizer.from_file(str(root / f"tokenizer{infix}.json"))
        sp = spm_vocab.processor((root / f"spm{infix}.model").read_bytes())
        for line in lines:
            assert tok.encode(line).ids == [*sp.encode(line), sp.eos_id()], line


@pytest.mark.parametrize(
    ("kind", "pre_tokenizer", "joined"),
    [("bpe-hf", "byte-level", True), ("wordpiece", "metaspace", False),
     ("unigram-hf", "metaspace", True)],
)  # fmt: skip
def test_tokenizers_vocabularies(prepared, tmp_path, kind, pre_tokenizer, joined):
    """One tokenizer.json per side, ids = fairseq ids, deterministic across runners,
    encoding and decoding through the committed vocabulary as every step does."""
    config = HfConfig(
        pre_tokenizer=pre_tokenizer, isolate_cjk=kind == "wordpiece", sample_sentences=3000
    )
    size = 2500 if kind == "unigram-hf" else 1200  # Unigram holds every character
    options = dict(model=kind, vocab_size=size, joined=joined, hf=config)
    a = vocab(prepared, tmp_path / "a", **options)
    b = vocab(prepared, tmp_path / "b", beam_args=MULTI_PROCESS, **options)
    sides = {"": "joined"} if joined else {".en": "en", ".zh": "zh"}
    names = {"dict.en.txt", "dict.zh.txt", "manifest.json"}
    assert {p.name for p in Path(a.output).iterdir()} == names | {
        f"tokenizer{infix}.json" for infix in sides
    }
    for infix, side in sides.items():
        data = (Path(a.output) / f"tokenizer{infix}.json").read_bytes()
        assert data == (Path(b.output) / f"tokenizer{infix}.json").read_bytes()
        info = a.manifest["vocabularies"][side]
        assert info["pipeline"] == hf_vocab.pipeline(kind, config)
        # WordPiece keeps every character of the sample: 2,000 distinct Chinese ones
        assert 1000 <= info["vocab_size"] <= (2500 if side == "zh" else size)
        tok = Tokenizer.from_str(data.decode())
        lang = "en" if side == "joined" else side
        symbols = [
            s for s, _ in read_dict((Path(a.output) / f"dict.{lang}.txt").read_text("utf-8"))
        ]
        # the tokenizer holds the dictionary's padding too: its ids are fairseq ids
        assert [tok.id_to_token(i) for i in range(4, 4 + len(symbols))] == symbols
        assert tok.get_vocab_size(with_added_tokens=False) == 4 + len(symbols)
    assert a.manifest["options"]["hf"]["pre_tokenizer"] == pre_tokenizer
    encoders = open_vocabulary(a.output)
    lines = example_lines("tatoeba-cmn", "zh", 300)
    zh = encoders.encoder("zh")
    flat, lengths = zh.encode_batch(lines)
    assert lengths.sum() == flat.size and (flat[np.cumsum(lengths) - 1] == 2).all()
    rows = np.split(flat, np.cumsum(lengths)[:-1])
    normalized = [Tokenizer.from_str(data.decode()).normalizer.normalize_str(x) for x in lines]
    decoded = [zh.decode(row[:-1]) for row in rows]
    if pre_tokenizer == "byte-level":
        assert decoded == normalized  # nothing is unknown: every line comes back
    else:
        assert sum(d == x for d, x in zip(decoded, normalized, strict=True)) > 0.9 * len(lines)
    assert vocab(prepared, tmp_path / "a", **options).cached


def test_bad_inputs(prepared, tmp_path):
    with pytest.raises(InputError, match="holds no committed prepare output"):
        vocab(str(tmp_path / "nothing"), tmp_path / "v")
    with pytest.raises(
        ConfigError,
        match=r"more than this data supports for en: the largest vocabulary it gives is \d+",
    ):
        vocab(prepared, tmp_path / "v", vocab_size=10**6)
    with pytest.raises(ConfigError, match="could not train a unigram-hf vocabulary of 300 for"):
        vocab(
            prepared, tmp_path / "u", model="unigram-hf", vocab_size=300,
            hf=HfConfig(sample_sentences=500),
        )  # fmt: skip
    with pytest.raises(ConfigError, match="unknown --model"):
        VocabConfig(prepared, str(tmp_path / "v"), model="word-piece")


def test_encoders_are_parsed_once_per_process_by_their_files(prepared, tmp_path):
    vocab(prepared, tmp_path / "joined", vocab_size=1000, joined=True)
    vocab(prepared, tmp_path / "apart", vocab_size=1000)
    shutil.copytree(tmp_path / "joined", tmp_path / "copy")
    en = open_vocabulary(str(tmp_path / "joined")).encoder("en")
    assert open_vocabulary(str(tmp_path / "joined")).encoder("en") is en
    assert open_vocabulary(str(tmp_path / "copy")).encoder("en") is en  # the same files
    same_dicts = (tmp_path / "joined/dict.en.txt").read_bytes() == (
        tmp_path / "joined/dict.zh.txt"
    ).read_bytes()
    assert (open_vocabulary(str(tmp_path / "joined")).encoder("zh") is en) == same_dicts
    apart = open_vocabulary(str(tmp_path / "apart")).encoder("en")  # other files
    assert apart is not en
    damaged = tmp_path / "copy" / "vocab.subwords"  # still read and checked every time
    damaged.write_bytes(damaged.read_bytes().replace(b"'", b'"', 1))
    with pytest.raises(IntegrityError, match=r"vocab\.subwords is corrupted"):
        open_vocabulary(str(tmp_path / "copy")).encoder("en")


# Every option of `nmtpipe vocab` set away from its default.
CUSTOM = {
    "vocab_size": 500, "joined": True, "max_subtoken_length": 7, "file_byte_budget": 3000,
    "max_characters": 99, "reserved_tokens": "<pad>,<EOS>,<x>", "min_count_range": "2,50",
    "sample_sentences": 1234, "character_coverage": 0.98, "normalization_rule": "nfkc",
    "user_defined_symbols": ["a", "b"], "spm_threads": 2, "seed": 3, "byte_fallback": True,
    "hf_normalizer": "nfc", "hf_pre_tokenizer": "byte-level", "isolate_cjk": True,
    "min_frequency": 3, "max_piece_length": 8,
}  # fmt: skip
SPM_DEFAULTS = {
    "character_coverage": 0.9995, "normalization_rule_name": "nmt_nfkc_cf",
    "user_defined_symbols": (), "num_threads": 4, "seed": 0, "max_sentence_length": 4192,
    "byte_fallback": False,
}  # fmt: skip
SPM_CUSTOM = {
    "character_coverage": 0.98, "normalization_rule_name": "nfkc",
    "user_defined_symbols": ("a", "b"), "num_threads": 2, "seed": 3,
    "max_sentence_length": 4192, "byte_fallback": True,
}  # fmt: skip
# The options each model's manifests record and fingerprint, as the committed outputs
# have them: a change here rebuilds every vocabulary instead of reusing it.
RECORDED = {
    ("t2t", False): {
        "model": "t2t", "vocab_size": 8192, "joined": False, "max_subtoken_length": None,
        "file_byte_budget": None, "max_characters": 6000000,
        "reserved_tokens": ("<pad>", "<EOS>"), "min_count_range": (1, 1000),
    },
    ("t2t", True): {
        "model": "t2t", "vocab_size": 500, "joined": True, "max_subtoken_length": 7,
        "file_byte_budget": 3000.0, "max_characters": 99,
        "reserved_tokens": ("<pad>", "<EOS>", "<x>"), "min_count_range": (2, 50),
    },
    ("unigram", False): {
        "model": "unigram", "vocab_size": 8192, "joined": False, "sample_sentences": 1000000,
        "spm": {"model_type": "unigram", **SPM_DEFAULTS},
    },
    ("unigram", True): {
        "model": "unigram", "vocab_size": 500, "joined": True, "sample_sentences": 1234,
        "spm": {"model_type": "unigram", **SPM_CUSTOM},
    },
    ("bpe", True): {
        "model": "bpe", "vocab_size": 500, "joined": True, "sample_sentences": 1234,
        "spm": {"model_type": "bpe", **SPM_CUSTOM},
    },
    ("bpe-hf", False): {
        "model": "bpe-hf", "vocab_size": 8192, "joined": False, "sample_sentences": 1000000,
        "hf": {"normalizer": "nfkc", "pre_tokenizer": "byte-level", "isolate_cjk": False,
               "min_frequency": 2, "max_piece_length": 16},
    },
    ("bpe-hf", True): {
        "model": "bpe-hf", "vocab_size": 500, "joined": True, "sample_sentences": 1234,
        "hf": {"normalizer": "nfc", "pre_tokenizer": "byte-level", "isolate_cjk": True,
               "min_frequency": 3, "max_piece_length": 8},
    },
    ("wordpiece", False): {
        "model": "wordpiece", "vocab_size": 8192, "joined": False, "sample_sentences": 1000000,
        "hf": {"normalizer": "nfkc", "pre_tokenizer": "metaspace", "isolate_cjk": True,
               "min_frequency": 2, "max_piece_length": 16},
    },
}  # fmt: skip


@pytest.mark.parametrize(("model", "custom"), list(RECORDED))
def test_the_recorded_options_are_the_committed_outputs(model, custom):
    """Flags and a YAML section give the same config, whose recorded options (and so
    fingerprint) are those of the vocabularies already committed."""
    section = {"model": model, **(CUSTOM if custom else {})}
    argv = ["vocab", "--prepared", "p", "--output", "o"]
    for key, value in section.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, ",".join(value) if isinstance(value, list) else str(value)]
    from_flags = flags.from_args(VocabConfig, build_parser("vocab").parse_args(argv))
    values, _ = flags.from_mapping(VocabConfig, section, "f.yaml: vocab", "vocab", {})
    from_yaml = flags.make(VocabConfig, {**values, "prepared": "p", "output": "o"})
    assert from_flags == from_yaml
    assert from_flags.options() == RECORDED[model, custom]
    assert list(from_flags.options()) == list(RECORDED[model, custom])
