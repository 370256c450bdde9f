"""nmtpipe's post-norm Transformer as a Hugging Face `MarianMTModel`, weight for weight.

MarianMT is the Transformers architecture that computes what nmtpipe's model computes:
post-norm layers, ReLU feed-forward, embeddings scaled by sqrt(d_model), sinusoidal
positions added to them, an output projection tied to the target embedding, and a
decoder that starts from a given token (nmtpipe starts from EOS, fairseq's
`prev_output_tokens`). Two details differ and are handled here:

- Positions. nmtpipe's signal is T2T's `get_timing_signal_1d` (timescale increment
  log(1e4)/(half - 1)); Marian's table uses log(1e4)/half. The table is a weight, so the
  export writes T2T's values into it and into `model.safetensors` (Marian's
  `save_pretrained` leaves the table out and `from_pretrained` keeps what the file has).
- Projections. nmtpipe projects keys and values with one [2d, d] matrix; Marian has
  `k_proj` and `v_proj`.

Refused, in one line each: pre-norm models (Marian has no final layer norm, so the
mapping would not be exact) and anything that is not nmtpipe's Transformer. This module
imports `transformers` (the `[export]` extra) and only export code imports it.
"""

from __future__ import annotations

from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import MarianConfig, MarianMTModel

from nmtpipe.trainers.model.config import ModelConfig
from nmtpipe.trainers.model.transformer import Transformer, timing_signal
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.vocab.id_layout import IdLayout

WEIGHTS = "model.safetensors"
_POSITIONS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")


def check_exportable(model_config: dict[str, Any], arch: str | None, url: str) -> ModelConfig:
    """The checkpoint's ModelConfig, or a one-line refusal saying why it cannot be MarianMT."""
    if arch is not None and not arch.startswith("transformer"):
        raise ConfigError(f"{url}: a {arch} model has no Transformers equivalent; only "
                          "post-norm Transformers (transformer_*) are exported")  # fmt: skip
    known = set(ModelConfig.__dataclass_fields__)
    if set(model_config) - known:
        extra = ", ".join(sorted(set(model_config) - known))
        raise ConfigError(f"{url}: not a Transformer checkpoint (model fields {extra})")
    config = ModelConfig(**model_config)
    if config.pre_norm:
        raise ConfigError(
            f"{url}: a pre-norm Transformer (--pre-norm) has no exact MarianMT equivalent "
            "(Marian is post-norm, without the final layer norms); retrain without --pre-norm"
        )
    return config


def marian_config(c: ModelConfig, layout: IdLayout, max_positions: int) -> MarianConfig:
    """The MarianConfig of a model of shape `c` whose ids are laid out as `layout`."""
    return MarianConfig(
        vocab_size=c.src_vocab, decoder_vocab_size=c.tgt_vocab, d_model=c.d_model,
        encoder_layers=c.encoder_layers, decoder_layers=c.decoder_layers,
        encoder_attention_heads=c.heads, decoder_attention_heads=c.heads,
        encoder_ffn_dim=c.ffn, decoder_ffn_dim=c.ffn, activation_function="relu",
        dropout=c.dropout, attention_dropout=c.attention_dropout,
        activation_dropout=c.activation_dropout, scale_embedding=True,
        max_position_embeddings=max_positions, pad_token_id=layout.pad,
        eos_token_id=layout.eos, bos_token_id=layout.bos, decoder_start_token_id=layout.eos,
        forced_eos_token_id=layout.eos,
        share_encoder_decoder_embeddings=c.share_all_embeddings,
        tie_word_embeddings=c.share_all_embeddings or c.share_decoder_embeddings,
    )  # fmt: skip


def to_marian(model: Transformer, layout: IdLayout, max_positions: int) -> MarianMTModel:
    """A MarianMTModel computing what `model` computes, in eval mode."""
    c = model.config
    hf = MarianMTModel(marian_config(c, layout, max_positions)).eval()
    with torch.no_grad():
        hf.model.encoder.embed_tokens.weight.copy_(model.src_embed.weight)
        hf.model.decoder.embed_tokens.weight.copy_(model.tgt_embed.weight)
        if c.share_all_embeddings:
            hf.model.shared.weight.copy_(model.tgt_embed.weight)
        if model.output is not None:
            hf.lm_head.weight.copy_(model.output.weight)
        for stack in (hf.model.encoder, hf.model.decoder):
            stack.embed_positions.weight.copy_(timing_signal(max_positions, c.d_model))
        for theirs, ours in zip(hf.model.encoder.layers, model.encoder, strict=True):
            _copy_attention(theirs.self_attn, ours.attention)
            _copy_block(theirs, ours, ["self_attn_layer_norm", "final_layer_norm"])
        for theirs, ours in zip(hf.model.decoder.layers, model.decoder, strict=True):
            _copy_attention(theirs.self_attn, ours.self_attention)
            _copy_attention(theirs.encoder_attn, ours.cross_attention)
            norms = ["self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"]
            _copy_block(theirs, ours, norms)
    return hf


def _copy_attention(theirs: Any, ours: Any) -> None:
    theirs.q_proj.load_state_dict(ours.q.state_dict())
    theirs.out_proj.load_state_dict(ours.out.state_dict())
    key_w, value_w = ours.kv.weight.chunk(2, dim=0)  # nmtpipe's kv projection: [keys; values]
    key_b, value_b = ours.kv.bias.chunk(2, dim=0)
    theirs.k_proj.load_state_dict({"weight": key_w, "bias": key_b})
    theirs.v_proj.load_state_dict({"weight": value_w, "bias": value_b})


def _copy_block(theirs: Any, ours: Any, norms: list[str]) -> None:
    """Layer norms (one per sub-layer, in order) and the feed-forward weights."""
    for name, sub in zip(norms, ours.sub, strict=True):
        getattr(theirs, name).load_state_dict(sub.norm.state_dict())
    theirs.fc1.load_state_dict(ours.ffn.inner.state_dict())
    theirs.fc2.load_state_dict(ours.ffn.outer.state_dict())


def save_marian(hf: MarianMTModel, folder: str) -> None:
    """`save_pretrained`, then the position tables it leaves out put back into the weights
    (they are T2T's, not the ones Marian would compute on loading)."""
    hf.save_pretrained(folder)
    path = f"{folder}/{WEIGHTS}"
    tensors = load_file(path)
    tensors.update({name: hf.state_dict()[name].contiguous() for name in _POSITIONS})
    save_file(tensors, path, metadata={"format": "pt"})
