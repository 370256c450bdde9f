"""The Transformer encoder–decoder, with an incremental decoder for beam search.

Its shape is a `ModelConfig` (`trainers/model/config.py`, with the anchors' presets).
Embeddings are scaled by sqrt(d_model) and get T2T's sinusoidal timing signal
(`[sin | cos]` halves, positions from 0). Attention is
`torch.nn.functional.scaled_dot_product_attention`, so fused kernels run on GPU; a
decode step on the CPU (one query per hypothesis) takes two plain batched products,
faster there at those shapes.

The decoder runs either over a whole target prefix (training; causal attention) or one
position at a time over a `DecoderCache` of keys and values (decoding), which beam
search reorders by beam index; both give the same outputs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmtpipe.trainers.model.config import ModelConfig
from nmtpipe.trainers.model.embeddings import embedding_tables


def timing_signal(length: int, channels: int, offset: int = 0) -> Tensor:
    """T2T's `get_timing_signal_1d`: [sin | cos] of positions over geometric timescales."""
    half = channels // 2
    increment = math.log(1.0e4) / max(half - 1, 1)
    inv_timescales = torch.exp(torch.arange(half, dtype=torch.float32) * -increment)
    positions = torch.arange(offset, offset + length, dtype=torch.float32)
    scaled = positions[:, None] * inv_timescales[None, :]
    signal = torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)
    return F.pad(signal, (0, channels % 2))


@functools.lru_cache(maxsize=1024)
def _position_signal(channels: int, offset: int) -> Tensor:
    """One position's timing signal, kept: every decode step of every batch asks for
    the same few (six small operations each otherwise). Callers must not write into it."""
    return timing_signal(1, channels, offset)


@dataclass
class AttentionCache:
    """Keys and values of one attention layer, [batch, heads, length, head_dim]."""

    key: Tensor
    value: Tensor

    def reorder(self, order: Tensor) -> None:
        self.key = self.key.index_select(0, order)
        self.value = self.value.index_select(0, order)


class Attention(nn.Module):
    """Multi-head attention on `scaled_dot_product_attention`."""

    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _split(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, -1).transpose(1, 2)

    def project_kv(self, memory: Tensor) -> AttentionCache:
        key, value = self.kv(memory).chunk(2, dim=-1)
        return AttentionCache(self._split(key), self._split(value))

    def forward(
        self,
        x: Tensor,
        kv: AttentionCache,
        mask: Tensor | None = None,
        causal: bool = False,
    ) -> Tensor:
        """`mask`: bool [batch, 1, 1, keys], True where a key may be attended to.

        `x` may have `g` rows per row of `kv` (the hypotheses of one source in beam
        search): their queries are folded into one row's query positions, so the
        source's keys and values are read once, not once per hypothesis."""
        query = self._split(self.q(x))
        sources, heads, length, head_dim = kv.key.shape[0], *query.shape[1:]
        group = query.shape[0] // sources
        if group > 1:
            query = query.view(sources, group, heads, length, head_dim).transpose(1, 2)
            query = query.reshape(sources, heads, group * length, head_dim)
        if length == 1 and not self.training and query.device.type == "cpu":  # a decode step
            y = _attend_by_matmul(query, kv.key, kv.value, mask)
        else:
            dropout = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(
                query, kv.key, kv.value, attn_mask=mask, dropout_p=dropout, is_causal=causal
            )
        if group > 1:
            y = y.view(sources, heads, group, length, head_dim).transpose(1, 2)
            y = y.reshape(sources * group, heads, length, head_dim)
        batch, _, length, _ = y.shape
        return self.out(y.transpose(1, 2).reshape(batch, length, -1))


def _attend_by_matmul(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
    """`scaled_dot_product_attention` (no dropout, not causal) as two batched matrix
    products over (row, head) pairs.

    For a decode step's few queries per row over a short cache, PyTorch's fused CPU
    kernel, blocked for long sequences, costs 1.3-3x these calls (benchmarks/RESULTS.md);
    the result is the same to float32 rounding. The keys and values are read in place
    where their layout allows (a `GrowingCache`'s, a contiguous memory's)."""
    batch, heads, length, head_dim = query.shape
    q, k, v = (t.flatten(0, 1) for t in (query, key, value))
    scores = torch.bmm(q, k.transpose(1, 2)).mul_(head_dim**-0.5)
    if mask is not None:
        scores.view(batch, heads, length, -1).masked_fill_(mask.logical_not(), -math.inf)
    return torch.bmm(_softmax_rows(scores), v).view(batch, heads, length, head_dim)


def _softmax_rows(scores: Tensor, width: int = 16) -> Tensor:
    """`scores.softmax(dim=-1)`, its rows padded with -inf to `width` columns when they
    are shorter: PyTorch's CPU softmax runs rows shorter than a vector register (16
    floats with AVX-512) on a scalar path, 3-7x slower at the 4-15 keys of a short
    source or an early decode step (benchmarks/RESULTS.md). The padding adds zeros to
    each row's sum; the result is the same to float32 rounding."""
    keys = scores.shape[-1]
    if not 4 <= keys < width:  # below 4 keys the padding costs what it saves
        return scores.softmax(dim=-1)
    return F.pad(scores, (0, width - keys), value=-math.inf).softmax(dim=-1)[..., :keys]


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn: int, activation_dropout: float) -> None:
        super().__init__()
        self.inner = nn.Linear(d_model, ffn)
        self.activation: nn.Module = nn.ReLU()  # Identity where `inner` applies it itself
        self.outer = nn.Linear(ffn, d_model)
        self.dropout = nn.Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.outer(self.dropout(self.activation(self.inner(x))))


class _Residual(nn.Module):
    """x + dropout(f(norm(x))) (pre-norm) or norm(x + dropout(f(x))) (post-norm)."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, f: Any) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(f(self.norm(x)))
        return self.norm(x + self.dropout(f(x)))


class EncoderLayer(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.attention = Attention(c.d_model, c.heads, c.attention_dropout)
        self.ffn = FeedForward(c.d_model, c.ffn, c.activation_dropout)
        self.sub = nn.ModuleList(_Residual(c.d_model, c.dropout, c.pre_norm) for _ in range(2))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.sub[0](x, lambda h: self.attention(h, self.attention.project_kv(h), mask))
        return self.sub[1](x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.self_attention = Attention(c.d_model, c.heads, c.attention_dropout)
        self.cross_attention = Attention(c.d_model, c.heads, c.attention_dropout)
        self.ffn = FeedForward(c.d_model, c.ffn, c.activation_dropout)
        self.sub = nn.ModuleList(_Residual(c.d_model, c.dropout, c.pre_norm) for _ in range(3))

    def forward(
        self,
        x: Tensor,
        memory: AttentionCache,
        memory_mask: Tensor,
        cache: GrowingCache | None = None,
    ) -> Tensor:
        """A whole prefix (`cache` None: causal attention) or one new position per row,
        appended to `cache`."""

        def attend_self(h: Tensor) -> Tensor:
            new = self.self_attention.project_kv(h)
            if cache is None:
                return self.self_attention(h, new, causal=h.shape[1] > 1)
            return self.self_attention(h, cache.append(new))

        x = self.sub[0](x, attend_self)
        x = self.sub[1](x, lambda h: self.cross_attention(h, memory, memory_mask))
        return self.sub[2](x, self.ffn)


class GrowingCache:
    """Self-attention keys and values of the hypotheses so far, [rows, heads, length,
    head_dim], in buffers with room to grow: appending a position writes in place
    (capacity doubles when full), and reordering copies only the rows that change —
    few, when beam search keeps each surviving hypothesis in its parent's row. Fewer
    rows are compacted into the same buffers: on the CPU a fresh buffer's first touch
    (page faults) costs more than the copy itself."""

    def __init__(self, rows: int, heads: int, head_dim: int, like: Tensor, capacity: int) -> None:
        self.key = like.new_empty(rows, heads, max(capacity, 1), head_dim)
        self.value = torch.empty_like(self.key)
        self.length = 0

    def append(self, new: AttentionCache) -> AttentionCache:
        """Add one position (`new`: [rows, heads, 1, head_dim]); the keys and values so far."""
        if new.key.dtype != self.key.dtype:  # bf16 under autocast: store what is computed
            self.key, self.value = self.key.to(new.key.dtype), self.value.to(new.key.dtype)
        if self.length == self.key.shape[2]:
            self.key, self.value = (_with_room(t, 2 * self.length) for t in (self.key, self.value))
        self.key[:, :, self.length] = new.key[:, :, 0]
        self.value[:, :, self.length] = new.value[:, :, 0]
        self.length += 1
        return AttentionCache(self.key[:, :, : self.length], self.value[:, :, : self.length])

    def reorder(self, order: Tensor) -> None:
        """Row i becomes what row order[i] was (the moved rows are read out first)."""
        rows = order.numel()
        moved = torch.nonzero(order != torch.arange(rows, device=order.device)).view(-1)
        if moved.numel():
            sources = order.index_select(0, moved)
            for t in (self.key, self.value):
                valid = t[:rows, :, : self.length]
                valid.index_copy_(0, moved, t[:, :, : self.length].index_select(0, sources))
        if rows != self.key.shape[0]:
            self.key, self.value = self.key[:rows], self.value[:rows]

    def widen(self, group: int) -> None:
        """Each row becomes `group` rows holding the same keys and values."""
        self.key, self.value = (t.repeat_interleave(group, dim=0) for t in (self.key, self.value))


def _with_room(t: Tensor, capacity: int) -> Tensor:
    grown = t.new_empty(t.shape[0], t.shape[1], capacity, t.shape[3])
    grown[:, :, : t.shape[2]] = t
    return grown


def _contiguous(kv: AttentionCache) -> AttentionCache:
    """Keys and values laid out [batch, heads, length, head_dim] in memory, made once, so
    that every decode step reads them without a copy."""
    return AttentionCache(kv.key.contiguous(), kv.value.contiguous())


def hypothesis_rows(sources: Tensor, group: int) -> Tensor:
    """The rows of the hypotheses of `sources`, `group` hypotheses per source."""
    return (sources[:, None] * group + torch.arange(group, device=sources.device)).view(-1)


@dataclass
class DecoderCache:
    """What incremental decoding keeps between steps: per layer, the self-attention keys
    and values of every hypothesis so far, and the cross-attention keys and values of
    every source, once; hypotheses [i * group, (i + 1) * group) are source i's."""

    self_attention: list[GrowingCache]
    memory: list[AttentionCache]
    memory_mask: Tensor
    group: int = 1  # hypotheses per source
    length: int = 0

    def reorder(self, order: Tensor) -> None:
        """Keep the hypotheses `order` selects, in that order (beam search's survivors);
        each must stay among its source's."""
        for cache in self.self_attention:
            cache.reorder(order)

    def widen(self, group: int) -> None:
        """From one hypothesis per source to `group`, each a copy of its source's one."""
        for cache in self.self_attention:
            cache.widen(group)
        self.group *= group

    def keep_sources(self, sources: Tensor) -> None:
        """Keep only `sources` (rows of the source batch) and their hypotheses."""
        self.reorder(hypothesis_rows(sources, self.group))
        for cache in self.memory:
            cache.reorder(sources)
        self.memory_mask = self.memory_mask.index_select(0, sources)


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = self.config = config
        src_embed, self.tgt_embed = embedding_tables(c)  # target first: the parameter order
        self.src_embed = src_embed
        self.encoder = nn.ModuleList(EncoderLayer(c) for _ in range(c.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        # Pre-norm stacks end with a norm; post-norm layers end in one already.
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.pre_norm else nn.Identity()
        self.dropout = nn.Dropout(c.dropout)
        self.output = (
            None
            if c.share_all_embeddings or c.share_decoder_embeddings
            else nn.Linear(c.d_model, c.tgt_vocab, bias=False)
        )

    def _embed(self, table: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        x = table(tokens) * math.sqrt(self.config.d_model)
        length, channels = tokens.shape[1], self.config.d_model
        if length == 1:
            signal = _position_signal(channels, offset)
        else:
            signal = timing_signal(length, channels, offset)
        return self.dropout(x + signal.to(device=x.device, dtype=x.dtype))

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder states [batch, src_len, d_model] and the key mask [batch, 1, 1, src_len]."""
        mask = (src != self.config.pad)[:, None, None, :]
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.encoder_norm(x), mask

    def _logits(self, x: Tensor) -> Tensor:
        x = self.decoder_norm(x)
        if self.output is None:
            return F.linear(x, self.tgt_embed.weight)
        return self.output(x)

    def forward(self, src: Tensor, prev_tgt: Tensor, keep: Tensor | None = None) -> Tensor:
        """Logits [batch, tgt_len, tgt_vocab] for every target position (teacher forcing),
        or [positions, tgt_vocab] for the positions `keep` marks (the real tokens: the
        output layer, the largest, then does no work for padding)."""
        memory, mask = self.encode(src)
        x = self._embed(self.tgt_embed, prev_tgt)
        for layer in self.decoder:
            x = layer(x, layer.cross_attention.project_kv(memory), mask)
        return self._logits(x if keep is None else x[keep])

    def start_decoding(
        self, memory: Tensor, mask: Tensor, group: int = 1, steps: int = 8
    ) -> DecoderCache:
        """An empty decoder state over encoder output `memory`, for `group` hypotheses
        per source (beam search's beam size), with room for `steps` positions (beam
        search's longest), at most 32 at first: a long limit that is mostly not reached
        would spread each hypothesis's keys apart in memory and slow every step (more
        positions still fit, by growing)."""
        rows = memory.shape[0] * group
        heads, head_dim = self.config.heads, self._head_dim
        return DecoderCache(
            self_attention=[
                GrowingCache(rows, heads, head_dim, memory, min(steps, 32)) for _ in self.decoder
            ],
            memory=[
                _contiguous(layer.cross_attention.project_kv(memory)) for layer in self.decoder
            ],
            memory_mask=mask,
            group=group,
        )

    @property
    def _head_dim(self) -> int:
        return self.config.d_model // self.config.heads

    def decode_step(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        """Logits [hypotheses, tgt_vocab] of the next position after `tokens`
        [hypotheses] (the last token of each prefix); `cache` grows by one position."""
        x = self._embed(self.tgt_embed, tokens[:, None], offset=cache.length)
        for i, layer in enumerate(self.decoder):
            x = layer(x, cache.memory[i], cache.memory_mask, cache.self_attention[i])
        cache.length += 1
        return self._logits(x)[:, 0]
