"""Hugging Face `tokenizers` vocabularies as a vocabulary kind (`--model
wordpiece|bpe-hf|unigram-hf`).

Trained on a deterministic sample of the training split (`hf_vocab.py`); each side is one
`tokenizer.json`, padded to its fairseq dictionary's size so that its ids are fairseq
ids throughout, and export ships it as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from tokenizers import Tokenizer

from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.progress import heartbeat
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, dict_text
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ
from nmtpipe.transforms.vocab.kinds import base, hf_vocab
from nmtpipe.transforms.vocab.kinds.base import BuiltSide, SideEncoder, Source, infix
from nmtpipe.transforms.vocab.kinds.hf_vocab import HfConfig

# `tokenizers`' peak memory per character of the text it trains on (measured:
# benchmarks/RESULTS.md).
TRAINER_BYTES_PER_CHARACTER = 32


class HfKind(base.SampledKind):
    NAME = "hf"
    TITLE = "Hugging Face tokenizers"
    MODELS = hf_vocab.KINDS
    FILE_PATTERN = r"tokenizer(\.[^/]+)?\.json"
    Config = HfConfig
    # the defaults that depend on `--model`
    CONFIG_DEFAULTS: ClassVar[base.Defaults] = {
        "pre_tokenizer": lambda o: "byte-level" if o["model"] == "bpe-hf" else "metaspace",
        "isolate_cjk": lambda o: o["model"] == "wordpiece",
    }

    def files(self, side: str) -> list[str]:
        return [f"tokenizer{infix(side)}.json"]

    def build(self, source: Source, side: str, report: dict[str, Any]) -> BuiltSide:
        tok, piece_counts = _train(self, source, side, report)
        pieces = hf_vocab.pieces(tok)
        text = dict_text(pieces[len(SPECIALS) :], piece_counts[len(SPECIALS) :])
        # padded to the dictionary's size: tokenizer ids are fairseq ids throughout
        tok = hf_vocab.padded(tok, len(SPECIALS) + text.count("\n"))
        return BuiltSide([tok.to_str(pretty=True).encode("utf-8")], text, len(pieces))

    def encoder(self, data: bytes, dictionary_size: int) -> SideEncoder:
        return HfEncoder(hf_vocab.for_encoding(data), dictionary_size)

    def tokenizer(self, data: bytes, size: int) -> Any:
        return hf_vocab.padded(Tokenizer.from_str(data.decode("utf-8")), size)


def _train(
    kind: HfKind, source: Source, side: str, report: dict[str, Any]
) -> tuple[Tokenizer, list[int]]:
    """A `tokenizers` vocabulary of `side` and its piece counts over the sample."""
    model, options = kind.model, source.options
    config: HfConfig = kind.config(options)
    sentences = kind.sample_sentences(
        source, side, report, "tokenizers", TRAINER_BYTES_PER_CHARACTER
    )
    try:
        with heartbeat(f"{model} {side} on {len(sentences):,} sentences"):
            tok = hf_vocab.train(sentences, model, options.vocab_size, config)
    except Exception as e:  # `tokenizers` raises bare Exceptions
        raise ConfigError(
            f"tokenizers could not train a {model} vocabulary of "
            f"{options.vocab_size} for {side}: {e} (raise --vocab-size, or use "
            "--hf-pre-tokenizer byte-level, whose alphabet is 256 bytes)"
        ) from e
    report["pipeline"] = hf_vocab.pipeline(model, config)
    size = tok.get_vocab_size(with_added_tokens=False)
    why = hf_vocab.describe_size(model, options.vocab_size, size)
    if why:
        source.log(f"{side}: {why}")
    return tok, hf_vocab.piece_counts(tok, sentences)


class HfEncoder(SideEncoder):
    def __init__(self, tok: Tokenizer, dictionary_size: int) -> None:
        super().__init__(FAIRSEQ, dictionary_size)
        self._hf = tok
        self.vocab_size = tok.get_vocab_size(with_added_tokens=False)

    def encode_batch(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        # its post-processor appends the layout's EOS
        return base.flat_ids([e.ids for e in self._hf.encode_batch_fast(list(lines))])

    def decode(self, ids: Sequence[int]) -> str:
        """`<unk>` shown, as SentencePiece shows it."""
        control = {self.layout.bos, self.layout.pad, self.layout.eos}
        kept = [i for i in map(int, ids) if i not in control]
        return self._hf.decode(kept, skip_special_tokens=False)

    def piece(self, i: int) -> str:
        return self._hf.id_to_token(i)

    def outside(self, tokens: Sequence[str]) -> np.ndarray:
        """Tokens `tokenizers` encodes with `<unk>`."""
        batch = self._hf.encode_batch_fast(list(tokens), add_special_tokens=False)
        return np.fromiter((self.layout.unk in e.ids for e in batch), bool, len(tokens))
