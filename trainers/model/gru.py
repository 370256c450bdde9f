"""The recurrent seq2seq of fairseq's tutorial, with GRUs, and its incremental decoder.

The encoder is a bidirectional GRU over the source embeddings; its two directions'
final states, joined, start the decoder, a GRU of twice the units. Each decoder output
attends (scaled dot product) over the encoder outputs; the state and its context are
combined (`tanh(W [state; context])`) into the embedding space, where the output
projection is the target embedding (shared, and with a joined vocabulary shared with
the source too). Teacher forcing runs the decoder over the whole target at once;
decoding runs one step at a time from a cached hidden state (`GruCache`), which beam
search reorders by beam index, through the same calls as the Transformer's
(`encode`, `start_decoding`, `decode_step`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmtpipe.trainers.model.config import ModelConfig
from nmtpipe.trainers.model.embeddings import embedding_tables
from nmtpipe.trainers.model.transformer import hypothesis_rows


@dataclass
class GruCache:
    """What incremental decoding keeps between steps: every hypothesis's decoder state
    [layers, hypotheses, units] and, once per source, the encoder outputs and their mask;
    hypotheses [i * group, (i + 1) * group) are source i's."""

    hidden: Tensor
    memory: Tensor  # [sources, src_len, units]
    memory_mask: Tensor  # [sources, 1, 1, src_len], True where a position may be attended
    group: int = 1
    length: int = 0

    def reorder(self, order: Tensor) -> None:
        """Keep the hypotheses `order` selects, in that order (each among its source's)."""
        self.hidden = self.hidden.index_select(1, order)

    def widen(self, group: int) -> None:
        """From one hypothesis per source to `group`, each a copy of its source's one."""
        self.hidden = self.hidden.repeat_interleave(group, dim=1)
        self.group *= group

    def keep_sources(self, sources: Tensor) -> None:
        """Keep only `sources` (rows of the source batch) and their hypotheses."""
        self.reorder(hypothesis_rows(sources, self.group))
        self.memory = self.memory.index_select(0, sources)
        self.memory_mask = self.memory_mask.index_select(0, sources)


class GruSeq2Seq(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = self.config = config
        units = c.gru_hidden
        src_embed, self.tgt_embed = embedding_tables(c)  # target first: the parameter order
        self.src_embed = src_embed
        between = c.dropout if c.encoder_layers > 1 else 0.0
        self.encoder = nn.GRU(c.d_model, units, c.encoder_layers, batch_first=True,
                              bidirectional=True, dropout=between)  # fmt: skip
        between = c.dropout if c.decoder_layers > 1 else 0.0
        self.decoder = nn.GRU(c.d_model, 2 * units, c.decoder_layers, batch_first=True,
                              dropout=between)  # fmt: skip
        self.combine = nn.Linear(4 * units, c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.output = (
            None
            if c.share_all_embeddings or c.share_decoder_embeddings
            else nn.Linear(c.d_model, c.tgt_vocab, bias=False)
        )

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Encoder outputs [batch, src_len, 2 x units] (both directions) and the key mask
        [batch, 1, 1, src_len]; padding on the right is skipped (packed sequences)."""
        mask = (src != self.config.pad)[:, None, None, :]
        lengths = mask.sum(dim=-1).view(-1)
        packed = nn.utils.rnn.pack_padded_sequence(
            self.dropout(self.src_embed(src)), lengths.cpu(), batch_first=True,
            enforce_sorted=False,
        )  # fmt: skip
        out, _ = self.encoder(packed)
        memory, _ = nn.utils.rnn.pad_packed_sequence(
            out, batch_first=True, total_length=src.shape[1]
        )
        return memory, mask

    def _initial_state(self, memory: Tensor, mask: Tensor) -> Tensor:
        """The decoder's first state per layer: the forward direction's state at the
        last source position joined to the backward direction's at the first."""
        units = self.config.gru_hidden
        last = mask.sum(dim=-1).view(-1) - 1
        forward = memory[torch.arange(memory.shape[0], device=memory.device), last, :units]
        joined = torch.cat([forward, memory[:, 0, units:]], dim=-1)
        return joined[None].expand(self.config.decoder_layers, -1, -1).contiguous()

    def _attend(self, states: Tensor, memory: Tensor, mask: Tensor) -> Tensor:
        """Each state's context over its source's encoder outputs; `states` may hold
        `g` rows per source (beam search's hypotheses), read as one query block."""
        sources, rows = memory.shape[0], states.shape[0]
        group = rows // sources
        query = states.reshape(sources, 1, group * states.shape[1], -1)
        context = F.scaled_dot_product_attention(query, memory[:, None], memory[:, None],
                                                 attn_mask=mask)  # fmt: skip
        return context.view(rows, states.shape[1], -1)

    def _logits(self, states: Tensor, context: Tensor) -> Tensor:
        x = self.dropout(torch.tanh(self.combine(torch.cat([states, context], dim=-1))))
        if self.output is None:
            return F.linear(x, self.tgt_embed.weight)
        return self.output(x)

    def forward(self, src: Tensor, prev_tgt: Tensor, keep: Tensor | None = None) -> Tensor:
        """Logits [batch, tgt_len, tgt_vocab] for every target position (teacher forcing),
        or [positions, tgt_vocab] for the positions `keep` marks (the real tokens)."""
        memory, mask = self.encode(src)
        states, _ = self.decoder(
            self.dropout(self.tgt_embed(prev_tgt)), self._initial_state(memory, mask)
        )
        context = self._attend(states, memory, mask)
        if keep is not None:
            states, context = states[keep], context[keep]
        return self._logits(states, context)

    def start_decoding(
        self, memory: Tensor, mask: Tensor, group: int = 1, steps: int = 0
    ) -> GruCache:
        """A decoder state for `group` hypotheses per source (beam search's beam size);
        `steps` is for the Transformer's sake: a GRU's state does not grow."""
        hidden = self._initial_state(memory, mask).repeat_interleave(group, dim=1)
        return GruCache(hidden, memory, mask, group)

    def decode_step(self, tokens: Tensor, cache: GruCache) -> Tensor:
        """Logits [hypotheses, tgt_vocab] of the next position after `tokens`
        [hypotheses]; the cache's state advances one step."""
        states, cache.hidden = self.decoder(self.tgt_embed(tokens)[:, None], cache.hidden)
        cache.length += 1
        context = self._attend(states, cache.memory, cache.memory_mask)
        return self._logits(states, context)[:, 0]
