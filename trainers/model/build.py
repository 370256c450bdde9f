"""A model from its config: the Transformer or the GRU seq2seq, whichever it describes."""

from __future__ import annotations

from nmtpipe.trainers.model.config import ModelConfig
from nmtpipe.trainers.model.gru import GruSeq2Seq
from nmtpipe.trainers.model.transformer import Transformer

Seq2Seq = Transformer | GruSeq2Seq


def build_model(config: ModelConfig) -> Seq2Seq:
    return GruSeq2Seq(config) if config.kind == "gru" else Transformer(config)
