"""SentencePiece's encoder: batch encode = SentencePiece's own encode + EOS."""

from __future__ import annotations

import numpy as np
import sentencepiece as spm

from nmtpipe.transforms.vocab.kinds import spm_vocab
from nmtpipe.transforms.vocab.kinds.registry import kind_of
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig
from tests.helpers import example_lines, split_ids


def test_sentencepiece_batches_equal_spm_encode_plus_eos():
    model = spm_vocab.train(example_lines("tatoeba-cmn", "en", 3000), SpmConfig(), 500)
    encoder = kind_of("unigram").encoder(model, dictionary_size=504)
    reference = spm.SentencePieceProcessor(model_proto=model)
    lines = [*example_lines("tatoeba-cmn", "en")[3000:3400], "", "Ünïcødé ☃ 漢字"]
    flat, lengths = encoder.encode_batch(lines)
    assert split_ids(flat, lengths) == [[*reference.encode(line), 2] for line in lines]
    assert encoder.unknowns(flat) == int(np.count_nonzero(flat == 3)) > 0
    # Pieces as SentencePiece writes them: a word's first piece keeps its "▁".
    ids = reference.encode("They like it.")
    pieces = [encoder.piece(i) for i in ids]
    assert pieces == [reference.id_to_piece(i) for i in ids] and pieces[0].startswith("▁")
