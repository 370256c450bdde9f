"""Beam search: exhaustive with a wide beam, greedy at beam 1, batch-independent, true scores."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nmtpipe.trainers.model.beam_search import BeamSearch, Hypothesis, _in_parents_slots, top_k
from nmtpipe.trainers.model.config import ModelConfig
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.model.transformer import Transformer
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ

BOS, PAD, EOS, UNK = FAIRSEQ.bos, FAIRSEQ.pad, FAIRSEQ.eos, FAIRSEQ.unk
SOURCES = [[4, 5, 6, EOS], [6, EOS], [5, 4, 4, 6, 5, EOS]]


def model(vocab: int = 7, seed: int = 0, sharpness: float = 4.0) -> Transformer:
    """A random tiny model whose next-token distributions are far from uniform."""
    torch.manual_seed(seed)
    config = ModelConfig(
        src_vocab=vocab, tgt_vocab=vocab, pad=PAD, d_model=32, ffn=64, heads=4,
        encoder_layers=2, decoder_layers=2, share_all_embeddings=True,
    )  # fmt: skip
    m = Transformer(config).eval()
    with torch.no_grad():
        m.tgt_embed.weight.mul_(sharpness)
    return m


def padded(rows: list[list[int]]) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])


def log_prob(m: Transformer, src: list[int], hyp: list[int], eos: bool = True) -> float:
    """The model's own log-probability of `hyp` (+ EOS if `eos`) given `src`."""
    target = torch.tensor([[*hyp, EOS] if eos else hyp])
    prev = torch.tensor([[EOS, *hyp]])[:, : target.shape[1]]
    with torch.no_grad():
        lprobs = F.log_softmax(m(torch.tensor([src]), prev).float(), dim=-1)
    return float(lprobs[0].gather(1, target[0][:, None]).sum())


def exhaustive(m: Transformer, src: list[int], config: SearchConfig, longest: int):
    """The best-scoring EOS-terminated hypothesis of at most `longest` tokens before EOS."""
    symbols = [UNK, 4, 5, 6]
    best = None
    for n in range(longest + 1):
        for hyp in itertools.product(symbols, repeat=n):
            lp = log_prob(m, src, list(hyp))
            score = float(config.score(torch.tensor(lp), n + 1))
            if best is None or score > best[0]:
                best = (score, list(hyp))
    return best


@pytest.mark.parametrize(
    "config, longest",
    [
        (SearchConfig(beam=160, alpha=0.6, max_len_a=0, max_len_b=4), 3),
        (SearchConfig(beam=160, alpha=0.0, max_len_a=0, max_len_b=4), 3),
        (SearchConfig(beam=160, lenpen=1.0, max_len_a=0, max_len_b=3), 3),
    ],
    ids=["t2t-alpha0.6", "t2t-alpha0", "fairseq-lenpen1"],
)
def test_a_beam_wide_enough_finds_what_exhaustive_search_finds(config, longest):
    m = model()
    results = BeamSearch(m, FAIRSEQ, config)(padded(SOURCES))
    for src, hyps in zip(SOURCES, results, strict=True):
        score, tokens = exhaustive(m, src, config, longest)
        assert hyps[0].finished
        assert hyps[0].tokens == tokens
        assert hyps[0].score == pytest.approx(score, abs=1e-5)


def greedy(m: Transformer, src: list[int], max_len: int) -> list[int]:
    """Arg-max decoding by full forward passes: no cache, no beams."""
    hyp: list[int] = []
    while len(hyp) < max_len:
        with torch.no_grad():
            logits = m(torch.tensor([src]), torch.tensor([[EOS, *hyp]]))[0, -1]
        logits[[BOS, PAD]] = -float("inf")
        token = int(logits.argmax())
        if token == EOS:
            break
        hyp.append(token)
    return hyp


@pytest.mark.parametrize("config", [SearchConfig(beam=1), SearchConfig(beam=1, lenpen=1.0)])
def test_beam_one_is_greedy(config):
    m = model(vocab=40, sharpness=1.0)
    config = SearchConfig(**{**config.__dict__, "max_len_a": 0, "max_len_b": 12})
    results = BeamSearch(m, FAIRSEQ, config)(padded(SOURCES))
    for src, hyps in zip(SOURCES, results, strict=True):
        assert hyps[0].tokens == greedy(m, src, 12)


@pytest.mark.parametrize(
    "config", [SearchConfig(beam=4, nbest=4), SearchConfig(beam=5, lenpen=1.2)]
)
def test_a_sentence_alone_is_decoded_as_in_a_padded_batch(config):
    m = model(vocab=40, sharpness=2.0)
    search = BeamSearch(m, FAIRSEQ, config)
    together = search(padded(SOURCES))
    for src, in_batch in zip(SOURCES, together, strict=True):
        alone = search(padded([src]))[0]
        assert [h.tokens for h in alone] == [h.tokens for h in in_batch]
        for a, b in zip(alone, in_batch, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)


@pytest.mark.parametrize(
    "config", [SearchConfig(beam=4, nbest=4), SearchConfig(beam=4, nbest=3, lenpen=0.7)]
)
def test_scores_are_the_models_own_log_probabilities(config):
    m = model(vocab=40, sharpness=2.0)
    for src, hyps in zip(SOURCES, BeamSearch(m, FAIRSEQ, config)(padded(SOURCES)), strict=True):
        assert len(hyps) == config.nbest
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            lp = log_prob(m, src, h.tokens, eos=h.finished)
            assert h.log_prob == pytest.approx(lp, abs=1e-4)
            if h.finished:
                expected = float(config.score(torch.tensor(lp), len(h.tokens) + 1))
                assert h.score == pytest.approx(expected, abs=1e-4)
            else:  # filling an n-best list of too few finished, after the finished ones
                assert h.score == h.log_prob and h.tokens and hyps[0].finished
            assert EOS not in h.tokens and PAD not in h.tokens and BOS not in h.tokens


class _ShunsEos(Transformer):
    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        logits = super()._logits(x)
        logits[..., EOS] -= 30.0
        return logits


def eos_unlikely(m: Transformer) -> Transformer:
    """The model, made to (almost) never want EOS, in training and decoding alike."""
    m.__class__ = _ShunsEos
    return m


def test_a_blank_source_gets_an_empty_translation_without_a_search(monkeypatch):
    m = model(vocab=40, sharpness=2.0)
    search = BeamSearch(m, FAIRSEQ, SearchConfig(beam=4, nbest=2))
    sources = [np.array(s) for s in SOURCES]
    expected = search.translate(sources, torch.device("cpu"))
    searched, search_batch = [], BeamSearch.__call__

    def recorded(self, src, autocast=None):
        searched.append(src.shape[0])
        return search_batch(self, src, autocast)

    monkeypatch.setattr(BeamSearch, "__call__", recorded)
    blank = np.array([EOS])
    got = search.translate([blank, sources[0], blank, *sources[1:]], torch.device("cpu"))
    assert searched == [len(SOURCES)]  # one batch, of the sources with something in them
    assert got[0] == got[2] == [Hypothesis(tokens=[], score=0.0, log_prob=0.0, finished=True)] * 2
    assert [h.tokens for hyps in got[1:2] + got[3:] for h in hyps] == [
        h.tokens for hyps in expected for h in hyps
    ]
    searched.clear()
    assert search.translate([blank], torch.device("cpu"))[0][0].tokens == []
    assert searched == []


def test_at_max_length_t2t_returns_the_alive_hypotheses_unfinished():
    m = eos_unlikely(model(vocab=40))
    config = SearchConfig(beam=3, nbest=2, max_len_a=0, max_len_b=5)
    for src, hyps in zip(SOURCES, BeamSearch(m, FAIRSEQ, config)(padded(SOURCES)), strict=True):
        assert [h.finished for h in hyps] == [False, False]
        assert all(len(h.tokens) == 5 for h in hyps)
        # T2T scores an unfinished hypothesis by its log-probability (no EOS in it).
        prev = torch.tensor([[EOS, *hyps[0].tokens[:-1]]])
        with torch.no_grad():
            lp = F.log_softmax(m(torch.tensor([src]), prev), -1)[0]
        expected = float(lp.gather(1, torch.tensor(hyps[0].tokens)[:, None]).sum())
        assert hyps[0].score == pytest.approx(expected, abs=1e-4) == hyps[0].log_prob


def test_at_max_length_fairseq_forces_eos():
    m = eos_unlikely(model(vocab=40))
    config = SearchConfig(beam=3, nbest=3, lenpen=1.0, max_len_a=0, max_len_b=5)
    for src, hyps in zip(SOURCES, BeamSearch(m, FAIRSEQ, config)(padded(SOURCES)), strict=True):
        assert all(h.finished and len(h.tokens) == 5 for h in hyps)
        for h in hyps:
            assert h.log_prob == pytest.approx(log_prob(m, src, h.tokens), abs=1e-3)


def test_max_length_grows_with_each_sentences_own_source():
    m = eos_unlikely(model(vocab=40))
    config = SearchConfig(beam=2, max_len_a=1.0, max_len_b=1)
    results = BeamSearch(m, FAIRSEQ, config)(padded(SOURCES))
    assert [len(h[0].tokens) for h in results] == [len(s) + 1 for s in SOURCES]


def test_constraints_min_length_no_repeats_and_unknowns():
    m = model(vocab=12, sharpness=2.0)
    base = dict(beam=4, nbest=4, max_len_a=0, max_len_b=10)
    for hyps in BeamSearch(m, FAIRSEQ, SearchConfig(**base, min_len=6))(padded(SOURCES)):
        assert all(len(h.tokens) >= 6 for h in hyps)
    for hyps in BeamSearch(m, FAIRSEQ, SearchConfig(**base, no_repeat_ngram_size=2))(
        padded(SOURCES)
    ):
        for h in hyps:
            bigrams = list(zip(h.tokens, h.tokens[1:], strict=False))
            assert len(bigrams) == len(set(bigrams))
    for hyps in BeamSearch(m, FAIRSEQ, SearchConfig(**base, unk_penalty=1e9))(padded(SOURCES)):
        assert all(UNK not in h.tokens for h in hyps)


def test_bad_search_settings_are_refused():
    with pytest.raises(ValueError, match="nbest"):
        SearchConfig(beam=2, nbest=3)
    with pytest.raises(ValueError, match="negative"):
        SearchConfig(alpha=-1)


def test_survivors_stay_in_their_parents_slots_where_they_can():
    parents = torch.tensor([[0, 0, 0, 0], [2, 0, 2, 1], [3, 2, 1, 0], [1, 1, 3, 3]])
    held = _in_parents_slots(parents)  # per slot: which survivor (rank) it holds
    assert held.tolist() == [[0, 1, 2, 3], [1, 3, 0, 2], [3, 2, 1, 0], [1, 0, 3, 2]]
    for row, slots in zip(parents.tolist(), held.tolist(), strict=True):
        assert sorted(slots) == [0, 1, 2, 3]
        for parent in set(row):  # the best child of each parent is in the parent's slot
            assert slots[parent] == row.index(parent)


def test_under_bf16_autocast_the_cache_holds_bf16_and_the_search_agrees():
    """What CUDA runs (bf16 autocast), on the CPU's autocast."""
    m = model(vocab=40, sharpness=2.0)
    search = BeamSearch(m, FAIRSEQ, SearchConfig(beam=4, max_len_a=0, max_len_b=8))
    exact = search(padded(SOURCES))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        cache = m.start_decoding(*m.encode(padded(SOURCES)), group=4)
        m.decode_step(torch.full((12,), EOS), cache)
    assert cache.self_attention[0].key.dtype == torch.bfloat16
    low = search(padded(SOURCES), torch.autocast("cpu", dtype=torch.bfloat16))
    for a, b in zip(exact, low, strict=True):
        assert b[0].score == pytest.approx(a[0].score, abs=0.05)


@pytest.mark.parametrize("columns", [3, 8, 64, 65, 130, 1000, 8008])
def test_top_k_by_blocks_is_torch_topk(columns):
    g = torch.Generator().manual_seed(columns)
    table = torch.randn(16, columns, generator=g).log_softmax(dim=1)
    table[::3, : columns // 2] = -math.inf  # rows partly, or almost all, excluded
    table[5, :] = -math.inf
    table[5, columns - 1] = 0.0  # one candidate only, at the table's very end
    k = min(8, columns)
    values, where = top_k(table, k)
    # The k best values, best first, each at its own column (which of equal values
    # comes first is open, as it is for `topk`).
    torch.testing.assert_close(values, table.topk(k, dim=1).values, rtol=0, atol=0)
    assert torch.equal(table.gather(1, where), values)
    assert all(len(set(row)) == k for row in where.tolist())
