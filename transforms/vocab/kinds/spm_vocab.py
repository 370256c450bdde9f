"""SentencePiece models trained deterministically, with fairseq's special-id layout.

The model's first ids are fairseq's specials (`<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3),
so SentencePiece ids are fairseq ids and the `dict.txt` is the remaining pieces in id
order. Training is deterministic for the same sentences in the same order: no input
shuffling or sampling inside SentencePiece (nmtpipe draws the sample itself), a fixed
random seed, and a fixed thread count (the thread count changes the floating-point
reduction order, hence the scores).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sentencepiece as spm

from nmtpipe.transforms.options import comma_list, option
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, id_counts
from nmtpipe.transforms.vocab.kinds.base import SampledConfig

MODEL_TYPES = ("unigram", "bpe")


@dataclass(frozen=True)
class SpmConfig(SampledConfig):
    """SentencePiece training options (spm_train's flags of the same names), trained on
    a sample of `sample_sentences`. Two flags differ from their fields, since vocab's
    flags are one flat list: `--normalization-rule` (prepare has `--normalize`) and
    `--spm-threads` (a thread count that is part of the result, not a speed setting)."""

    model_type: str = "unigram"
    character_coverage: float = option(0.9995, metavar="F", help="spm_train's character_coverage")
    normalization_rule_name: str = option(
        "nmt_nfkc_cf",
        name="normalization_rule",
        metavar="RULE",
        help="spm_train's normalization_rule_name",
    )
    user_defined_symbols: tuple[str, ...] = option(
        (), parse=comma_list, metavar="S,...", help="pieces kept whole, comma-separated"
    )
    num_threads: int = option(
        4, name="spm_threads", metavar="N", help="training threads; part of the result, so fixed"
    )
    seed: int = option(0, metavar="N", help="SentencePiece's random seed")
    max_sentence_length: int = 4192
    # Characters the pieces do not cover become their UTF-8 bytes (<0xE4> ...), so any
    # text encodes and decodes without `<unk>` (256 byte pieces join the vocabulary).
    byte_fallback: bool = option(
        False,
        help="spm_train's byte_fallback: characters outside the pieces become their UTF-8 "
        "bytes instead of <unk>, so every input can be translated",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"unknown SentencePiece model type {self.model_type!r}")
        if not 0 < self.character_coverage <= 1:
            raise ValueError("character coverage must be in (0, 1]")


def trainer_options(config: SpmConfig, vocab_size: int) -> dict[str, object]:
    """spm_train's flags for `config` and `vocab_size` (the vocab step's one
    `--vocab-size`), fairseq's ids first, nothing left to chance."""
    bos, pad, eos, unk = range(len(SPECIALS))
    return {
        "model_type": config.model_type,
        "vocab_size": vocab_size,
        "character_coverage": config.character_coverage,
        "normalization_rule_name": config.normalization_rule_name,
        "user_defined_symbols": list(config.user_defined_symbols),
        "bos_id": bos,
        "pad_id": pad,
        "eos_id": eos,
        "unk_id": unk,
        "input_sentence_size": 0,
        "shuffle_input_sentence": False,
        "num_threads": config.num_threads,
        "max_sentence_length": config.max_sentence_length,
        "byte_fallback": config.byte_fallback,
        "minloglevel": 2,
    }


def train(sentences: Iterable[str], config: SpmConfig, vocab_size: int) -> bytes:
    """Train a model of `vocab_size` pieces on sentences in memory; the model's bytes,
    the same for the same input (no input path is embedded, as it would be with
    spm_train's --input)."""
    spm.set_random_generator_seed(config.seed)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, **trainer_options(config, vocab_size)
    )
    return model.getvalue()


def processor(model: bytes) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_proto=model)


def vocab_text(model: bytes) -> str:
    """The `.vocab` file spm_train writes next to a model: piece TAB score per line."""
    sp = processor(model)
    return "".join(
        f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n" for i in range(sp.get_piece_size())
    )


def pieces_and_scores(model: bytes) -> list[tuple[str, float]]:
    """What identifies a model's vocabulary (the file embeds its input path)."""
    sp = processor(model)
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


def piece_counts(model: bytes, sentences: Sequence[str], batch: int = 10_000) -> list[int]:
    """How often each id occurs when the model encodes `sentences` (in batches, so that
    only one batch's ids are ever Python objects)."""
    sp = processor(model)
    batches = (sp.encode(list(sentences[i : i + batch])) for i in range(0, len(sentences), batch))
    return id_counts(batches, sp.get_piece_size())
