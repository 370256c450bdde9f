"""`tokenizers` vocabularies: the pipeline, fairseq's ids, exact round trips, the same
file from every process, padding."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nmtpipe.transforms.vocab.kinds import hf_vocab
from nmtpipe.transforms.vocab.kinds.hf_vocab import HfConfig
from tests.helpers import example_lines

LINES = example_lines("tatoeba-cmn", "en", 3000) + example_lines("tatoeba-cmn", "zh", 3000)
COMBINATIONS = [
    (kind, pre_tokenizer) for kind in hf_vocab.KINDS for pre_tokenizer in hf_vocab.PRE_TOKENIZERS
]


def _train(kind: str, pre_tokenizer: str, size: int = 2500):
    config = HfConfig(pre_tokenizer=pre_tokenizer, isolate_cjk=kind == "wordpiece")
    return hf_vocab.train(LINES, kind, size, config)


@pytest.mark.parametrize(("kind", "pre_tokenizer"), COMBINATIONS)
def test_specials_first_eos_appended_and_text_comes_back(kind, pre_tokenizer):
    tok = _train(kind, pre_tokenizer)
    assert hf_vocab.pieces(tok)[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    enc = hf_vocab.for_encoding(tok.to_str().encode())
    for line in LINES[::50]:
        ids = enc.encode(line).ids
        assert ids[-1] == 2 and 2 not in ids[:-1] and not {0, 1} & set(ids)
        if 3 not in ids:  # decoding undoes the pre-tokeniser exactly
            assert enc.decode(ids, skip_special_tokens=True) == enc.normalizer.normalize_str(line)


def test_byte_level_knows_every_character():
    """Out-of-domain text with characters the sample never had: nothing unknown."""
    enc = hf_vocab.for_encoding(_train("bpe-hf", "byte-level").to_str().encode())
    news = example_lines("ntrex128-enzh", "zh", 300)
    for line in news:
        ids = enc.encode(line.rstrip("\r")).ids
        assert 3 not in ids
        assert enc.decode(ids, skip_special_tokens=True) == enc.normalizer.normalize_str(
            line.rstrip("\r")
        )


@pytest.mark.parametrize("kind", hf_vocab.KINDS)
def test_the_same_file_from_every_process(kind):
    """`tokenizers` trains in hash-map order, seeded per process; the file is not."""
    code = (
        "import sys\n"
        "from tests.transforms.vocab.kinds.test_hf_vocab import _train\n"
        f"sys.stdout.write(_train({kind!r}, 'metaspace').to_str())\n"
    )
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    assert runs[0].stdout == runs[1].stdout == _train(kind, "metaspace").to_str()


def test_unigram_specials_are_unreachable_and_pieces_are_numbered_by_score():
    doc = json.loads(_train("unigram-hf", "metaspace").to_str())
    vocab = doc["model"]["vocab"]
    assert [s for _, s in vocab[:4]] == [hf_vocab._UNREACHABLE] * 4
    scores = [s for _, s in vocab[4:]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("kind", hf_vocab.KINDS)
def test_padding_adds_ids_that_text_does_not_produce(kind):
    tok = _train(kind, "metaspace")
    size = tok.get_vocab_size(with_added_tokens=False)
    padded = hf_vocab.padded(tok, size + 6)
    assert hf_vocab.pieces(padded)[size:] == [f"madeupword{k:04d}" for k in range(6)]
    assert hf_vocab.padded(tok, size) is tok
    for line in LINES[::100]:
        assert padded.encode(line).ids == tok.encode(line).ids


def test_the_pipeline_is_described_stage_by_stage():
    config = HfConfig(normalizer="nfkc-lowercase", pre_tokenizer="byte-level", isolate_cjk=True)
    assert hf_vocab.pipeline("bpe-hf", config) == {
        "normalizer": "nfkc-lowercase",
        "pre_tokenizer": ["split at each Han, kana and Hangul character", "byte-level"],
        "model": "bpe-hf",
        "post_processor": "append </s>",
        "decoder": "byte-level",
    }
    tok = hf_vocab.train(LINES, "bpe-hf", 800, config)
    assert tok.normalizer.normalize_str("ＡBC") == "abc"


def test_bad_options_and_sizes_are_explained():
    with pytest.raises(ValueError, match="unknown pre-tokeniser 'bert'; choose from metaspace"):
        HfConfig(pre_tokenizer="bert")
    with pytest.raises(ValueError, match="unknown normaliser"):
        HfConfig(normalizer="nfkd")
    with pytest.raises(ValueError, match="at least 1"):
        HfConfig(min_frequency=0)
    assert hf_vocab.describe_size("bpe-hf", 100, 100) is None
    assert "needs 2158 pieces to cover every character" in hf_vocab.describe_size(
        "wordpiece", 1200, 2158
    )
    assert "supports 900 bpe-hf pieces, 90%" in hf_vocab.describe_size("bpe-hf", 1000, 900)
