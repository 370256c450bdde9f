"""Loading a vocabulary for encoding: batch encode = the library's own encode + EOS."""

from __future__ import annotations

import numpy as np
import pytest
import sentencepiece as spm

from nmtpipe.transforms.vocab import hf_vocab, id_layout, spm_vocab
from nmtpipe.transforms.vocab.hf_vocab import HfConfig
from nmtpipe.transforms.vocab.spm_vocab import SpmConfig
from nmtpipe.transforms.vocab.subword import SubwordTextEncoder
from nmtpipe.transforms.vocab.vocabulary import SideEncoder, arrow_dtype
from tests.helpers import DATA, example_lines

GOLDEN = DATA / "golden"


def split(flat: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    ends = np.cumsum(lengths)
    return [flat[end - n : end].tolist() for end, n in zip(ends, lengths, strict=True)]


def test_t2t_batches_equal_t2t_encode_plus_eos():
    import gzip

    text = gzip.decompress((GOLDEN / "t2t-vocab-tatoeba.zh.8192.txt.gz").read_bytes())
    encoder = SideEncoder("t2t", text, dictionary_size=8200)
    reference = SubwordTextEncoder.from_text(text.decode())
    lines = [*example_lines("tatoeba-cmn", "zh", 500), "", "a_b\\c ☃ 𝔘"]
    flat, lengths = encoder.encode_batch(lines)
    assert split(flat, lengths) == [[*reference.encode(line), 1] for line in lines]
    assert encoder.unknowns(flat) == 0 and encoder.layout == id_layout.T2T
    assert [encoder.piece(i) for i in flat[:3].tolist()] == [
        reference.subtokens[i] for i in flat[:3]
    ]


def test_sentencepiece_batches_equal_spm_encode_plus_eos():
    model = spm_vocab.train(example_lines("tatoeba-cmn", "en", 3000), SpmConfig(vocab_size=500))
    encoder = SideEncoder("unigram", model, dictionary_size=504)
    reference = spm.SentencePieceProcessor(model_proto=model)
    lines = [*example_lines("tatoeba-cmn", "en")[3000:3400], "", "Ünïcødé ☃ 漢字"]
    flat, lengths = encoder.encode_batch(lines)
    assert split(flat, lengths) == [[*reference.encode(line), 2] for line in lines]
    assert encoder.unknowns(flat) == int(np.count_nonzero(flat == 3)) > 0
    # Pieces as SentencePiece writes them: a word's first piece keeps its "▁".
    ids = reference.encode("They like it.")
    pieces = [encoder.piece(i) for i in ids]
    assert pieces == [reference.id_to_piece(i) for i in ids] and pieces[0].startswith("▁")


def test_t2t_ids_map_to_fairseq_dictionary_ids():
    ids = np.array([0, 1, 2, 3, 8191], dtype=np.int64)
    assert id_layout.to_fairseq("t2t", ids).tolist() == [1, 2, 4, 5, 8193]
    assert id_layout.to_fairseq("bpe", ids) is ids


@pytest.mark.parametrize(
    ("size", "dtype"), [(8192, np.uint16), (65499, np.uint16), (65500, np.int32)]
)
def test_arrow_dtype(size, dtype):
    assert arrow_dtype(size) == dtype


def test_a_tokenizers_vocabulary_shows_its_own_pieces():
    lines = example_lines("tatoeba-cmn", "en", 2000)
    tok = hf_vocab.train(lines, "bpe-hf", 600, HfConfig())
    encoder = SideEncoder("bpe-hf", tok.to_str().encode(), dictionary_size=604)
    pieces = hf_vocab.pieces(tok)
    assert [encoder.piece(i) for i in range(len(pieces))] == pieces
