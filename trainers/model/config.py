"""The shape of a model and the anchors' presets (no torch here: the CLI reads it).

Presets follow the anchors: `transformer_base` is T2T's `transformer_base` and fairseq's
`transformer_wmt_en_de` (512/2048, 8 heads, 6+6 layers), `transformer_big` fairseq's
`transformer_vaswani_wmt_en_de_big` (1024/4096, 16 heads, dropout 0.3), and
`transformer_small`/`transformer_tiny` T2T's (2+2 layers, 256/1024/4 and 128/512/4).
`rnn_gru` is the recurrent seq2seq of fairseq's tutorial, with GRUs (`gru.py`): a
bidirectional encoder of `hidden` units per direction, a decoder of twice that, one
layer each, dot-product attention.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

KINDS = ("transformer", "gru")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a model; with the vocabulary, everything a checkpoint needs to rebuild it."""

    src_vocab: int
    tgt_vocab: int
    pad: int
    kind: str = "transformer"  # or "gru"
    d_model: int = 512  # the embedding size (and, for a Transformer, of every layer)
    ffn: int = 2048
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    pre_norm: bool = False
    share_all_embeddings: bool = False  # one table for source, target and output (joined vocab)
    share_decoder_embeddings: bool = True  # target embedding = output projection
    hidden: int = 0  # a GRU encoder's units per direction (0: d_model)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; choose from {', '.join(KINDS)}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by {self.heads} heads")
        if self.share_all_embeddings and self.src_vocab != self.tgt_vocab:
            raise ValueError("shared embeddings need one vocabulary for both languages")

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def gru_hidden(self) -> int:
        return self.hidden or self.d_model


PRESETS: dict[str, dict[str, Any]] = {
    "transformer_base": {},
    "transformer_big": {"d_model": 1024, "ffn": 4096, "heads": 16, "dropout": 0.3},
    "transformer_small": {
        "d_model": 256, "ffn": 1024, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
    },
    "transformer_tiny": {
        "d_model": 128, "ffn": 512, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
    },
    "rnn_gru": {
        "kind": "gru", "d_model": 256, "hidden": 256, "encoder_layers": 1, "decoder_layers": 1,
        "dropout": 0.2,
    },
}  # fmt: skip


def preset(name: str, **fields: Any) -> ModelConfig:
    """A preset's config with the vocabulary fields (and any overrides) filled in."""
    if name not in PRESETS:
        raise ValueError(f"unknown --arch {name!r}; choose from {', '.join(PRESETS)}")
    return ModelConfig(**{**PRESETS[name], **fields})
