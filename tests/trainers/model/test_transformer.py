"""The Transformer: incremental decoding = the full forward pass, masks, presets."""

from __future__ import annotations

import pytest
import torch

from nmtpipe.trainers.model.config import ModelConfig, preset
from nmtpipe.trainers.model.transformer import Transformer, _attend_by_matmul, timing_signal

PAD = 1


def tiny(**fields) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab=50, tgt_vocab=50, pad=PAD, d_model=32, ffn=64, heads=4,
        encoder_layers=2, decoder_layers=2, **fields,
    )  # fmt: skip
    return Transformer(config).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, PAD, PAD]])
    tgt = torch.tensor([[2, 11, 12, 13, 14, 15], [2, 16, 17, 18, 19, 20]])
    return src, tgt


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("shared", [False, True])
def test_incremental_decoding_equals_the_full_pass(pre_norm, shared):
    model = tiny(pre_norm=pre_norm, share_all_embeddings=shared)
    src, _ = batch()
    tgt = torch.randint(4, 50, (2, 21))  # the cache starts with room for 8, then doubles
    with torch.no_grad():
        full = model(src, tgt)
        cache = model.start_decoding(*model.encode(src))
        steps = torch.stack([model.decode_step(tgt[:, t], cache) for t in range(tgt.shape[1])], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_a_sentence_alone_equals_it_in_a_padded_batch():
    model = tiny()
    src, tgt = batch()
    with torch.no_grad():
        together = model(src, tgt)[1]
        alone = model(src[1:, :3], tgt[1:])[0]
    torch.testing.assert_close(alone, together, atol=1e-5, rtol=1e-5)


def test_the_decoder_cannot_see_the_future():
    model = tiny()
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, 4:] = 30
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt)[:, :4], model(src, changed)[:, :4])


def test_a_widened_cache_decodes_as_one_started_wide():
    """Beam search's first step runs once per source, then widens the cache to the beam."""
    model = tiny()
    src, tgt = batch()
    with torch.no_grad():
        narrow = model.start_decoding(*model.encode(src))
        wide = model.start_decoding(*model.encode(src), group=3)
        first = model.decode_step(tgt[:, 0], narrow)
        expected = model.decode_step(tgt[:, 0].repeat_interleave(3), wide)
        torch.testing.assert_close(first.repeat_interleave(3, dim=0), expected)
        narrow.widen(3)
        assert narrow.group == 3
        following = torch.tensor([7, 8, 9, 10, 11, 12])
        torch.testing.assert_close(
            model.decode_step(following, narrow), model.decode_step(following, wide)
        )


def test_reordering_the_cache_follows_the_hypotheses():
    model = tiny()
    src, tgt = batch()
    # Two hypotheses per source (a beam of 2): rows 0, 1 are source 0's, rows 2, 3 source 1's.
    prefixes = torch.cat([tgt, tgt.flip(0)])[[0, 2, 1, 3]]
    with torch.no_grad():
        cache = model.start_decoding(*model.encode(src), group=2)
        for t in range(2):
            model.decode_step(prefixes[:, t], cache)
        order = torch.tensor([1, 1, 3, 2])  # each source's beam keeps its own hypotheses
        cache.reorder(order)
        after = model.decode_step(prefixes[order, 2], cache)
        expected = model(src[[0, 0, 1, 1]], prefixes[order, :3])[:, 2]
        torch.testing.assert_close(after, expected, atol=1e-5, rtol=1e-5)
        cache.keep_sources(torch.tensor([1]))  # source 0's search is over
        last = model.decode_step(prefixes[order[2:], 3], cache)
        alone = model(src[[1, 1], :3], prefixes[order[2:], :4])[:, 3]
    torch.testing.assert_close(last, alone, atol=1e-5, rtol=1e-5)


def test_a_cache_with_room_for_every_step_is_written_and_compacted_in_place():
    model = tiny()
    src, _ = batch()
    tgt = torch.randint(4, 50, (4, 7))  # two hypotheses per source
    with torch.no_grad():
        cache = model.start_decoding(*model.encode(src), group=2, steps=tgt.shape[1])
        layer = cache.self_attention[0]
        storage = layer.key.untyped_storage().data_ptr()
        for t in range(5):
            model.decode_step(tgt[:, t], cache)
        cache.keep_sources(torch.tensor([1]))  # source 0's search is over
        last = model.decode_step(tgt[2:, 5], cache)
        alone = model(src[[1, 1], :3], tgt[2:, :6])[:, 5]
    assert layer.key.shape[0] == 2 and layer.key.untyped_storage().data_ptr() == storage
    torch.testing.assert_close(last, alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("keys", [2, 5, 15, 16, 20])  # softmax rows padded to 16 from 4 keys
def test_attention_by_matmul_is_scaled_dot_product_attention(group, keys):
    g = torch.Generator().manual_seed(0)
    sources, heads, dim = 3, 2, 8
    query = torch.randn(sources, heads, group, dim, generator=g)
    # Keys and values as decoding holds them: views into buffers with room for more.
    key = torch.randn(sources, heads, 24, dim, generator=g)[:, :, :keys]
    value = torch.randn(sources, heads, 24, dim, generator=g)[:, :, :keys]
    mask = torch.arange(keys) < torch.tensor([keys, keys - 1, 1])[:, None]  # padded sources
    mask = mask[:, None, None, :]
    want = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    torch.testing.assert_close(_attend_by_matmul(query, key, value, mask), want)
    want = torch.nn.functional.scaled_dot_product_attention(query, key, value)
    torch.testing.assert_close(_attend_by_matmul(query, key, value, None), want)


def test_presets_and_shared_weights():
    base = preset("transformer_base", src_vocab=1000, tgt_vocab=1000, pad=1)
    assert (base.d_model, base.ffn, base.heads, base.encoder_layers) == (512, 2048, 8, 6)
    big = preset("transformer_big", src_vocab=1000, tgt_vocab=1000, pad=1)
    assert (big.d_model, big.heads, big.dropout) == (1024, 16, 0.3)
    tiny_config = preset("transformer_tiny", src_vocab=8, tgt_vocab=8, pad=1)
    assert (tiny_config.d_model, tiny_config.ffn, tiny_config.decoder_layers) == (128, 512, 2)
    shared = Transformer(preset("transformer_tiny", src_vocab=100, tgt_vocab=100, pad=1,
                                share_all_embeddings=True))  # fmt: skip
    separate = Transformer(preset("transformer_tiny", src_vocab=100, tgt_vocab=100, pad=1))
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(separate) - count(shared) == 100 * 128
    assert shared.src_embed is shared.tgt_embed
    with pytest.raises(ValueError, match="unknown --arch 'transformer_huge'"):
        preset("transformer_huge", src_vocab=8, tgt_vocab=8, pad=1)
    with pytest.raises(ValueError, match="one vocabulary for both"):
        preset("transformer_tiny", src_vocab=8, tgt_vocab=9, pad=1, share_all_embeddings=True)


def test_timing_signal_is_t2ts():
    signal = timing_signal(3, 6)
    # channels/2 = 3 timescales 1, 1e-2, 1e-4 (log-spaced from 1 to 1e4), sin then cos.
    position = 2.0
    expected = [torch.sin(torch.tensor(position * s)) for s in (1.0, 1e-2, 1e-4)]
    expected += [torch.cos(torch.tensor(position * s)) for s in (1.0, 1e-2, 1e-4)]
    torch.testing.assert_close(signal[2], torch.stack(expected))
