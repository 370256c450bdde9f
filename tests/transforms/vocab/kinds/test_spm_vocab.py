"""SentencePiece training: deterministic, fairseq's ids, spm_train's own .vocab format."""

from __future__ import annotations

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS
from nmtpipe.transforms.vocab.kinds import spm_vocab
from nmtpipe.transforms.vocab.kinds.spm import _our_flags
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig
from tests.helpers import example_lines


def sentences(n=3000):
    return example_lines("tatoeba-cmn", "en")[:n]


def sentences_file(tmp_path, n=3000):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(sentences(n)) + "\n", encoding="utf-8")
    return str(path)


def test_same_input_same_model_bytes_and_fairseq_ids():
    config = SpmConfig(user_defined_symbols=("<sep>",))
    first, second = (
        spm_vocab.train(sentences(), config, 600),
        spm_vocab.train(sentences(), config, 600),
    )
    assert first == second
    pieces = [p for p, _ in spm_vocab.pieces_and_scores(first)]
    assert pieces[: len(SPECIALS) + 1] == [*SPECIALS, "<sep>"]
    assert len(pieces) == 600
    bpe = spm_vocab.train(sentences(), SpmConfig(model_type="bpe"), 600)
    assert spm_vocab.pieces_and_scores(bpe) != spm_vocab.pieces_and_scores(first)


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_same_model_as_spm_train_on_a_file(tmp_path, model_type):
    config = SpmConfig(model_type=model_type, character_coverage=0.9995)
    prefix = str(tmp_path / "m")
    spm.set_random_generator_seed(config.seed)
    spm.SentencePieceTrainer.train(
        input=sentences_file(tmp_path),
        model_prefix=prefix,
        **spm_vocab.trainer_options(config, 500),
    )
    ours = spm_vocab.train(sentences(), config, 500)
    theirs = (tmp_path / "m.model").read_bytes()
    assert spm_vocab.pieces_and_scores(ours) == spm_vocab.pieces_and_scores(theirs)


def test_vocab_file_is_what_spm_train_writes(tmp_path):
    path = sentences_file(tmp_path, 1500)
    prefix = str(tmp_path / "m")
    spm.SentencePieceTrainer.train(
        input=path, model_prefix=prefix, vocab_size=400, bos_id=0, pad_id=1, eos_id=2, unk_id=3,
        minloglevel=2,
    )  # fmt: skip
    model = (tmp_path / "m.model").read_bytes()
    assert spm_vocab.vocab_text(model) == (tmp_path / "m.vocab").read_text(encoding="utf-8")


def test_piece_counts():
    model = spm_vocab.train(sentences(1500), SpmConfig(), 400)
    counts = spm_vocab.piece_counts(model, ["hello world", "hello"])
    sp = spm_vocab.processor(model)
    assert sum(counts) == len(sp.encode("hello world")) + len(sp.encode("hello"))
    lines = sentences(50)
    assert spm_vocab.piece_counts(model, lines, batch=7) == spm_vocab.piece_counts(model, lines)


_BYTE_FALLBACK = SpmConfig(byte_fallback=True, normalization_rule_name="identity")


@pytest.fixture(scope="module")
def byte_fallback_model() -> spm.SentencePieceProcessor:
    return spm_vocab.processor(spm_vocab.train(sentences(), _BYTE_FALLBACK, 900))


# What SentencePiece does to any text before its pieces: spaces are the piece boundary
# (collapsed, stripped; U+2581 is their escape), so the property is over text without
# leading, trailing or repeated spaces.
_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters=" \u2581\x00"), min_size=1
).map(lambda s: " ".join(s.split(" ")))


@given(text=st.lists(_TEXT, min_size=1, max_size=3).map(" ".join))
@settings(max_examples=200, deadline=None)
def test_byte_fallback_round_trips_any_unicode(byte_fallback_model, text):
    ids = byte_fallback_model.encode(text)
    assert byte_fallback_model.unk_id() not in ids
    assert byte_fallback_model.decode(ids) == text


def test_byte_fallback_leaves_no_unknown_in_chinese(byte_fallback_model):
    """An English-only model meets Chinese: every character becomes its bytes."""
    plain = spm_vocab.processor(spm_vocab.train(sentences(), SpmConfig(), 900))
    text = "他在在的的的。Tom 喜欢吃苹果。"
    assert plain.unk_id() in plain.encode(text)  # without it, <unk> (decoded as ⁇)
    pieces = byte_fallback_model.encode(text, out_type=str)
    assert (
        "<0xE4>" in pieces and byte_fallback_model.decode(byte_fallback_model.encode(text)) == text
    )


def test_sentencepiece_s_flags_are_named_as_nmtpipe_s_options_in_its_messages():
    said = "Vocabulary size too high (8000); --character_coverage 0.5, --model_type unigram"
    assert _our_flags(said) == (
        "Vocabulary size too high (8000); --character-coverage 0.5, --model_type unigram"
    )
