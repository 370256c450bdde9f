"""The embedding tables every model kind starts from: one table for source, target and
output when the vocabulary is joined, normal(0, d^-0.5) as fairseq and T2T initialise
them, padding's row zero."""

from __future__ import annotations

from torch import nn

from nmtpipe.trainers.model.config import ModelConfig


def embedding_tables(c: ModelConfig) -> tuple[nn.Embedding, nn.Embedding]:
    """(source, target) tables; the same object when `share_all_embeddings`."""
    tgt = nn.Embedding(c.tgt_vocab, c.d_model, padding_idx=c.pad)
    src = tgt if c.share_all_embeddings else nn.Embedding(c.src_vocab, c.d_model, padding_idx=c.pad)
    for table in {id(t): t for t in (src, tgt)}.values():
        nn.init.normal_(table.weight, 0.0, c.d_model**-0.5)
        nn.init.zeros_(table.weight[c.pad])
    return src, tgt
