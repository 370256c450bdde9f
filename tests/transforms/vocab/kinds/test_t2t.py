"""T2T's encoder: batch encode = T2T's own encode + EOS."""

from __future__ import annotations

import gzip

from nmtpipe.transforms.vocab import id_layout
from nmtpipe.transforms.vocab.kinds.registry import kind_of
from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
from tests.helpers import DATA, example_lines, split_ids

GOLDEN = DATA / "golden"


def test_t2t_batches_equal_t2t_encode_plus_eos():
    text = gzip.decompress((GOLDEN / "t2t-vocab-tatoeba.zh.8192.txt.gz").read_bytes())
    encoder = kind_of("t2t").encoder(text, dictionary_size=8200)
    reference = SubwordTextEncoder.from_text(text.decode())
    lines = [*example_lines("tatoeba-cmn", "zh", 500), "", "a_b\\c ☃ 𝔘"]
    flat, lengths = encoder.encode_batch(lines)
    assert split_ids(flat, lengths) == [[*reference.encode(line), 1] for line in lines]
    assert encoder.unknowns(flat) == 0 and encoder.layout == id_layout.T2T
    assert [encoder.piece(i) for i in flat[:3].tolist()] == [
        reference.subtokens[i] for i in flat[:3]
    ]
