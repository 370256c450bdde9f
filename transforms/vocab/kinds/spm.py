"""SentencePiece unigram and BPE models as a vocabulary kind (`--model unigram|bpe`).

Trained on a deterministic sample of the training split (`spm_vocab.py`), with fairseq's
special ids, so SentencePiece ids are fairseq ids. Each side is `spm.model` and its
`.vocab`, and where one reproduces the model exactly a `tokenizer.json` beside them
(`tokenizer_json.py`), which is also what export ships.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import sentencepiece as spm

from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.options import options
from nmtpipe.transforms.progress import heartbeat
from nmtpipe.transforms.vocab import tokenizer_json
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, dict_text
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ
from nmtpipe.transforms.vocab.kinds import base, spm_vocab
from nmtpipe.transforms.vocab.kinds.base import BuiltSide, SideEncoder, Source, infix
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig

# spm_train's peak memory per character of the text it trains on (its suffix array and
# piece candidates; measured: benchmarks/RESULTS.md).
TRAINER_BYTES_PER_CHARACTER = 32


class SpmKind(base.SampledKind):
    NAME = "spm"
    TITLE = "SentencePiece"
    MODELS = spm_vocab.MODEL_TYPES
    FILE_PATTERN = r"spm(\.[^/]+)?\.(model|vocab)|tokenizer(\.[^/]+)?\.json"
    Config = SpmConfig
    # the model type is `--model`'s (unigram for the other kinds, whose options these are not)
    CONFIG_DEFAULTS: ClassVar[base.Defaults] = {
        "model_type": lambda o: o["model"] if o["model"] in SpmKind.MODELS else "unigram",
    }

    def files(self, side: str) -> list[str]:
        return [f"spm{infix(side)}.model", f"spm{infix(side)}.vocab"]

    def build(self, source: Source, side: str, report: dict[str, Any]) -> BuiltSide:
        sentences = self.sample_sentences(
            source, side, report, "SentencePiece", TRAINER_BYTES_PER_CHARACTER
        )
        config: SpmConfig = self.config(source.options)
        try:
            with heartbeat(f"SentencePiece {side} on {len(sentences):,} sentences"):
                model = spm_vocab.train(sentences, config, source.options.vocab_size)
        except RuntimeError as e:
            said = _our_flags(str(e))
            raise ConfigError(f"SentencePiece could not train on {side}: {said}") from e
        piece_counts = spm_vocab.piece_counts(model, sentences)
        pieces = [p for p, _ in spm_vocab.pieces_and_scores(model)]
        return BuiltSide(
            [model, spm_vocab.vocab_text(model).encode()],
            dict_text(pieces[len(SPECIALS) :], piece_counts[len(SPECIALS) :]),
            len(pieces),
            _tokenizer_json(model, side, source.log),
        )

    def encoder(self, data: bytes, dictionary_size: int) -> SideEncoder:
        return SpmEncoder(spm.SentencePieceProcessor(model_proto=data), dictionary_size)

    def tokenizer(self, data: bytes, size: int) -> Any:
        return tokenizer_json.spm_tokenizer(data, size)


def _tokenizer_json(
    model: bytes, side: str, log: Callable[[str], None]
) -> list[tuple[str, bytes, str]]:
    """The model also as `tokenizer.json` (the same ids, EOS appended), for Hugging Face
    `tokenizers` users; none, with the reason logged, where no `tokenizer.json`
    reproduces the model exactly."""
    try:
        tok = tokenizer_json.spm_tokenizer(model)
    except tokenizer_json.NotExpressible as e:
        log(f"no tokenizer.json for {side}: {e}")
        return []
    name = tokenizer_json.TOKENIZER_FILE.replace(".json", f"{infix(side)}.json")
    return [(name, tok.to_str(pretty=True).encode("utf-8"), "tokenizer-json")]


class SpmEncoder(SideEncoder):
    def __init__(self, processor: spm.SentencePieceProcessor, dictionary_size: int) -> None:
        super().__init__(FAIRSEQ, dictionary_size)
        self._spm = processor
        self.vocab_size = processor.get_piece_size()

    def encode_batch(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        # the model's eos_id is the layout's (spm_vocab trains it so)
        return base.flat_ids(self._spm.encode(list(lines), add_eos=True, num_threads=1))

    def decode(self, ids: Sequence[int]) -> str:
        return self._spm.decode([int(i) for i in ids])

    def piece(self, i: int) -> str:
        return self._spm.id_to_piece(i)

    def outside(self, tokens: Sequence[str]) -> np.ndarray:
        """Tokens SentencePiece encodes with `<unk>`."""
        encoded = self._spm.encode(list(tokens), num_threads=1)
        return np.fromiter((self.layout.unk in ids for ids in encoded), bool, len(tokens))


def _our_flags(message: str) -> str:
    """SentencePiece's message with its trainer's flags (`--character_coverage`) named as
    nmtpipe's options that set them (`--character-coverage`)."""
    ours = {option.path[-1]: option.flag for option in options(SpmConfig)}
    ours["vocab_size"] = "--vocab-size"
    return re.sub(r"--([a-z_]+)", lambda m: ours.get(m[1], m[0]), message)
