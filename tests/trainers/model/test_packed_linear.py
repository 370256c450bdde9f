"""Linear layers packed for oneDNN: the same model function, the same translations, and
no packing where it does not apply."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.model.build import Seq2Seq, build_model
from nmtpipe.trainers.model.config import ModelConfig
from nmtpipe.trainers.model.packed_linear import PackedLinear, pack_linears
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.model.transformer import FeedForward
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ

PAD, EOS = FAIRSEQ.pad, FAIRSEQ.eos
SRC = torch.tensor([[5, 9, 12, 7, 30, EOS], [8, 40, EOS, PAD, PAD, PAD], [11, 3, 3, 6, 9, EOS]])


def model(kind: str = "transformer", tied: bool = True) -> Seq2Seq:
    torch.manual_seed(0)
    config = ModelConfig(
        kind=kind, src_vocab=48, tgt_vocab=48, pad=PAD, d_model=32, ffn=64, heads=4,
        encoder_layers=2, decoder_layers=2, hidden=16, share_all_embeddings=tied,
    )  # fmt: skip
    return build_model(config).eval()


def step_logits(m: Seq2Seq, steps: list[int]) -> torch.Tensor:
    """The incremental decoder's logits over a fixed target prefix, for all of SRC."""
    with torch.no_grad():
        cache = m.start_decoding(*m.encode(SRC))
        return torch.stack([m.decode_step(torch.full((SRC.shape[0],), t), cache) for t in steps], 1)


@pytest.mark.parametrize(("kind", "tied"), [("transformer", True), ("transformer", False),
                                            ("gru", True)])  # fmt: skip
def test_a_packed_model_computes_the_same_function_and_keeps_its_weights(kind, tied):
    m = model(kind, tied)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    want = step_logits(m, [EOS, 10, 20, 30])
    assert pack_linears(m)
    assert not [name for name, mod in m.named_modules() if type(mod) is nn.Linear]
    assert isinstance(m.output, PackedLinear)
    ffns = [mod for mod in m.modules() if isinstance(mod, FeedForward)]
    assert len(ffns) == (4 if kind == "transformer" else 0)
    assert all(f.inner.activation == "relu" and type(f.activation) is nn.Identity for f in ffns)
    torch.testing.assert_close(step_logits(m, [EOS, 10, 20, 30]), want, atol=1e-5, rtol=1e-5)
    assert m.state_dict().keys() == before.keys()
    for key, value in m.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_beam_search_finds_the_same_translations_packed():
    config = SearchConfig(beam=4, lenpen=1.0, max_len_a=1.0, max_len_b=5, nbest=2)
    m = model()
    with torch.no_grad():
        m.tgt_embed.weight.mul_(4.0)  # peaked distributions: no near-ties to break
    want = BeamSearch(m, FAIRSEQ, config)(SRC)
    assert pack_linears(m)
    got = BeamSearch(m, FAIRSEQ, config)(SRC)
    assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in want]
    for hyps, ref in zip(got, want, strict=True):
        assert [h.score for h in hyps] == pytest.approx([h.score for h in ref], abs=1e-4)


def test_a_model_that_trains_or_is_not_float32_is_left_alone():
    training = model().train()
    assert not pack_linears(training)
    assert any(type(mod) is nn.Linear for mod in training.modules())
    assert training.output is None
    half = model().to(torch.float64)
    assert not pack_linears(half)
    assert half.output is None
