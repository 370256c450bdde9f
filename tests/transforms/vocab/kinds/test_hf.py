"""The `tokenizers` encoder."""

from __future__ import annotations

from nmtpipe.transforms.vocab.kinds import hf_vocab
from nmtpipe.transforms.vocab.kinds.hf_vocab import HfConfig
from nmtpipe.transforms.vocab.kinds.registry import kind_of
from tests.helpers import example_lines


def test_a_tokenizers_vocabulary_shows_its_own_pieces():
    lines = example_lines("tatoeba-cmn", "en", 2000)
    tok = hf_vocab.train(lines, "bpe-hf", 600, HfConfig())
    encoder = kind_of("bpe-hf").encoder(tok.to_str().encode(), dictionary_size=604)
    pieces = hf_vocab.pieces(tok)
    assert [encoder.piece(i) for i in range(len(pieces))] == pieces
