"""SentencePiece models as `tokenizer.json`: the same ids and the same text back, with and
without prepare's normalisation in front; models `tokenizers` cannot mirror are refused."""

from __future__ import annotations

import random

import pytest
import sentencepiece as spm

from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer
from nmtpipe.transforms.vocab import tokenizer_json
from nmtpipe.transforms.vocab.kinds import spm_vocab
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig
from tests.helpers import example_lines

ODD = [
    "  Tom's   “café”  — ３ｋｍ！ ",
    "Ⅻ ﬁne\u00a0x\u0301\u200b",
    "",
    "\tx<unk>y <s> </s><pad>",
    "ＡＢＣ，（测试）",
]


def _texts() -> list[str]:
    return example_lines("tatoeba-cmn", "en", 400) + example_lines("tatoeba-cmn", "zh", 400) + ODD


@pytest.fixture(scope="module", params=["unigram", "bpe"])
def model(request) -> bytes:
    lines = example_lines("tatoeba-cmn", "en", 2000) + example_lines("tatoeba-cmn", "zh", 2000)
    lines += ["a <b> c", "1 < 2 > 0", "</p>"] * 20  # specials' characters are in the vocabulary
    config = SpmConfig(model_type=request.param, character_coverage=0.98)
    return spm_vocab.train(lines, config, 800)


def test_ids_and_text_are_sentencepieces(model):
    sp = spm_vocab.processor(model)
    tok = tokenizer_json.spm_tokenizer(model, size=sp.get_piece_size() + 3)
    assert tok.get_vocab_size() == sp.get_piece_size() + 3
    tok.encode_special_tokens = True  # as the export's tokenizer_config.json asks
    for text in _texts():
        want = sp.encode(text)
        assert tok.encode(text).ids == [*want, sp.eos_id()], text
        assert tok.decode(want, skip_special_tokens=False) == sp.decode(want), text
    rng = random.Random(0)
    pieces = [sp.unk_id(), *range(4, sp.get_piece_size())]
    for _ in range(500):  # any id sequence a model may write, unknown pieces included
        ids = [rng.choice(pieces) for _ in range(rng.randint(1, 8))]
        assert tok.decode(ids, skip_special_tokens=False) == sp.decode(ids), ids


CONFIGS = [
    NormalizeConfig(),
    NormalizeConfig("nfkc", True),
    NormalizeConfig("none", False, False),
    NormalizeConfig(keep_fullwidth_punct=True),  # prepare's default for Chinese sides
]


@pytest.mark.parametrize("config", CONFIGS)
def test_prepare_normalisation_in_front(model, config):
    sp = spm_vocab.processor(model)
    tok = tokenizer_json.with_normalization(tokenizer_json.spm_tokenizer(model), config)
    tok.encode_special_tokens = True
    texts = _texts()
    for text, normal in zip(texts, Normalizer(config).batch(texts), strict=True):
        assert tok.encode(text).ids == [*sp.encode(normal), sp.eos_id()], text


def test_options_tokenizers_cannot_mirror_are_refused(tmp_path):
    lines = example_lines("tatoeba-cmn", "en", 1000)
    prefix = str(tmp_path / "m")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=300, bos_id=0, pad_id=1,
        eos_id=2, unk_id=3, split_digits=True, minloglevel=2,
    )  # fmt: skip
    with pytest.raises(tokenizer_json.NotExpressible, match="split digits"):
        tokenizer_json.spm_tokenizer((tmp_path / "m.model").read_bytes())
