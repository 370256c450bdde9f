"""The GRU seq2seq: incremental decoding = the full pass, padding ignored, it learns."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.model.build import build_model
from nmtpipe.trainers.model.config import preset
from nmtpipe.trainers.model.gru import GruSeq2Seq
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ

PAD, EOS = FAIRSEQ.pad, FAIRSEQ.eos


def small(shared: bool = True, layers: int = 1) -> GruSeq2Seq:
    torch.manual_seed(0)
    config = preset(
        "rnn_gru",
        src_vocab=40,
        tgt_vocab=40,
        pad=PAD,
        d_model=24,
        hidden=16,
        encoder_layers=layers,
        decoder_layers=layers,
        share_all_embeddings=shared,
    )
    model = build_model(config)  # fmt: skip
    assert isinstance(model, GruSeq2Seq)
    return model.eval()


SRC = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])


@pytest.mark.parametrize("shared, layers", [(True, 1), (False, 2)])
def test_incremental_decoding_equals_the_full_pass(shared, layers):
    model = small(shared, layers)
    tgt = torch.randint(4, 40, (2, 9))
    with torch.no_grad():
        full = model(SRC, tgt)
        cache = model.start_decoding(*model.encode(SRC))
        steps = torch.stack([model.decode_step(tgt[:, t], cache) for t in range(tgt.shape[1])], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    assert cache.length == 9


def test_a_widened_cache_decodes_as_one_started_wide():
    model = small()
    with torch.no_grad():
        narrow = model.start_decoding(*model.encode(SRC))
        wide = model.start_decoding(*model.encode(SRC), group=2)
        start = torch.full((2,), EOS)
        first = model.decode_step(start, narrow)
        torch.testing.assert_close(
            first.repeat_interleave(2, dim=0), model.decode_step(start.repeat(2), wide)
        )
        narrow.widen(2)
        following = torch.tensor([5, 6, 7, 8])
        torch.testing.assert_close(
            model.decode_step(following, narrow), model.decode_step(following, wide)
        )


def test_padding_changes_nothing():
    model = small()
    alone = torch.tensor([[9, 10, EOS]])
    tgt = torch.tensor([[EOS, 11, 12]])
    with torch.no_grad():
        padded = model(SRC, torch.cat([tgt, tgt]))[1]
        single = model(alone, tgt)[0]
    torch.testing.assert_close(padded, single, atol=1e-5, rtol=1e-5)


def test_reordering_and_dropping_sources_equal_the_full_pass():
    model = small()
    tgt = torch.randint(4, 40, (2, 6))
    with torch.no_grad():
        full = model(SRC, tgt)
        cache = model.start_decoding(*model.encode(SRC), group=2)
        rows = torch.stack([tgt[0], tgt[0], tgt[1], tgt[1]])
        for t in range(3):
            model.decode_step(rows[:, t], cache)
        cache.reorder(torch.tensor([1, 0, 3, 2]))  # swap the two hypotheses of each source
        cache.keep_sources(torch.tensor([1]))  # the first sentence is done
        out = [model.decode_step(rows[2:, t], cache) for t in range(3, 6)]
    for step, logits in zip(range(3, 6), out, strict=True):
        torch.testing.assert_close(logits, full[1, step].expand(2, -1), atol=1e-5, rtol=1e-5)


def test_it_learns_to_copy_and_beam_search_finds_the_copy():
    torch.manual_seed(1)
    config = preset("rnn_gru", src_vocab=12, tgt_vocab=12, pad=PAD, d_model=32, hidden=32,
                    dropout=0.0, share_all_embeddings=True)  # fmt: skip
    model = build_model(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        seq = torch.randint(4, 12, (32, 5))
        src = torch.cat([seq, torch.full((32, 1), EOS)], 1)
        prev = torch.cat([torch.full((32, 1), EOS), seq], 1)
        loss = F.cross_entropy(model(src, prev).flatten(0, 1), src.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    test = torch.tensor([[7, 4, 11, 5, 9, EOS]])
    ((best, *_),) = BeamSearch(model, FAIRSEQ, SearchConfig(beam=4))(test)
    assert best.tokens == [7, 4, 11, 5, 9] and best.finished
