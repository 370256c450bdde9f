"""Vocabularies trained by Hugging Face `tokenizers`: WordPiece, byte-level BPE, Unigram.

Each is one `tokenizer.json`, the whole pipeline in one file, built from `HfConfig`:

  normaliser      none | nfc | nfkc | nfkc-lowercase (on top of `prepare`'s own)
  pre-tokeniser   metaspace: spaces become `▁` and start every word (SentencePiece's
                  convention); byte-level: GPT-2's bytes-as-characters, so that no text
                  is ever unknown. Optionally each Han, kana and Hangul character is a
                  word of its own (`isolate_cjk`, as BERT does for Chinese).
  model           wordpiece (greedy longest match), bpe-hf (ranked merges) or
                  unigram-hf (Viterbi over piece scores)
  post-processor  `</s>` appended
  decoder         the inverse of the pre-tokeniser: text comes back as it was normalised

fairseq's specials are ids 0–3 (`<s>`, `<pad>`, `</s>`, `<unk>`), as in every nmtpipe
vocabulary, and the vocabulary is padded to its fairseq dictionary's size with
`madeupwordNNNN` entries, so tokenizer ids are fairseq ids with no mapping.

Determinism: `tokenizers` trains in hash-map order, which Rust seeds per process. BPE
is unaffected. WordPiece is, through its `##` continuation pieces (ids and tie-breaks
change run to run), so continuation pieces carry no prefix: with either pre-tokeniser
a word's first piece is already marked (`▁`, or `Ġ` after a space). Unigram's scores
differ in their last bits, and the characters it keeps only for coverage get scores in
hash order; scores are rounded to float32 (SentencePiece's precision) and those
characters share one score below every other piece. Pieces are then numbered by score.

As in the SentencePiece `tokenizer.json` (`tokenizer_json.py`), a special's spelling
typed in raw text (`</s>`) can become that special where the model matches it as a
piece: WordPiece always, Unigram where a character of it is outside the vocabulary
(`tokenizers` scores unknown characters below every piece); BPE never.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    trainers,
)
from tokenizers import pre_tokenizers as pre

from nmtpipe.transforms.options import option
from nmtpipe.transforms.vocab import tokenizer_json
from nmtpipe.transforms.vocab.fairseq_dict import BOS, EOS, PAD, SPECIALS, UNK, id_counts
from nmtpipe.transforms.vocab.kinds.base import SampledConfig

KINDS = ("wordpiece", "bpe-hf", "unigram-hf")
NORMALIZERS = ("none", "nfc", "nfkc", "nfkc-lowercase")
PRE_TOKENIZERS = ("metaspace", "byte-level")
_SPACE = "▁"
_CJK = Regex(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_UNREACHABLE = -1e9  # the score of Unigram pieces text must never produce
_BATCH = 10_000


@dataclass(frozen=True)
class HfConfig(SampledConfig):
    """The pipeline of a `tokenizers` vocabulary (recorded in the manifest), trained on
    a sample of `sample_sentences`. Its normaliser and pre-tokeniser are flagged
    `--hf-normalizer` and `--hf-pre-tokenizer`: vocab's flags are one flat list, and
    prepare's `--normalize` happens before them."""

    normalizer: str = option(
        "nfkc",
        name="hf_normalizer",
        choices=NORMALIZERS,
        help="the tokenizer's own normaliser, after prepare's",
    )
    pre_tokenizer: str = option(
        "metaspace",
        name="hf_pre_tokenizer",
        choices=PRE_TOKENIZERS,
        help="metaspace: SentencePiece's ▁ word starts; byte-level: GPT-2's bytes, no "
        "unknown text (default: byte-level for bpe-hf, metaspace otherwise)",
    )
    isolate_cjk: bool = option(
        False,
        negatable=True,
        help="each Han, kana and Hangul character a word of its own, as BERT splits "
        "Chinese (default: on for wordpiece, which cannot learn unspaced text)",
    )
    # BPE and WordPiece: pairs seen fewer times are never merged
    min_frequency: int = option(
        2, metavar="N", help="wordpiece, bpe-hf: merge no pair seen fewer than N times"
    )
    max_piece_length: int = option(  # BPE and Unigram
        16, metavar="L", help="bpe-hf, unigram-hf: pieces of at most L characters"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.normalizer not in NORMALIZERS:
            raise ValueError(
                f"unknown normaliser {self.normalizer!r}; choose from {', '.join(NORMALIZERS)}"
            )
        if self.pre_tokenizer not in PRE_TOKENIZERS:
            raise ValueError(
                f"unknown pre-tokeniser {self.pre_tokenizer!r}; "
                f"choose from {', '.join(PRE_TOKENIZERS)}"
            )
        if self.min_frequency < 1 or self.max_piece_length < 1:
            raise ValueError("min_frequency and max_piece_length must be at least 1")


def pipeline(kind: str, config: HfConfig) -> dict[str, Any]:
    """The five stages in words, for the manifest and the command's report."""
    isolate = ["split at each Han, kana and Hangul character"] if config.isolate_cjk else []
    if config.pre_tokenizer == "metaspace":  # the order `_pre_tokenizer` runs them in
        words = [config.pre_tokenizer, *isolate]
    else:
        words = [*isolate, config.pre_tokenizer]
    return {
        "normalizer": config.normalizer,
        "pre_tokenizer": words,
        "model": kind,
        "post_processor": f"append {SPECIALS[EOS]}",
        "decoder": config.pre_tokenizer,
    }


def _normalizer(name: str) -> Any:
    steps = {
        "none": [],
        "nfc": [normalizers.NFC()],
        "nfkc": [normalizers.NFKC()],
        "nfkc-lowercase": [normalizers.NFKC(), normalizers.Lowercase()],
    }[name]
    return normalizers.Sequence(steps)


def _pre_tokenizer(config: HfConfig) -> Any:
    """Metaspace marks word starts before CJK characters are split off (so that they
    get no `▁` of their own); byte-level maps bytes after (so that the split sees
    characters)."""
    isolate = [pre.Split(_CJK, "isolated")] if config.isolate_cjk else []
    if config.pre_tokenizer == "metaspace":
        return pre.Sequence([pre.Metaspace(_SPACE, prepend_scheme="always"), *isolate])
    return pre.Sequence([*isolate, pre.ByteLevel(add_prefix_space=False, use_regex=True)])


def _decoder(config: HfConfig) -> Any:
    if config.pre_tokenizer == "metaspace":
        return decoders.Metaspace(_SPACE, prepend_scheme="always")
    return decoders.ByteLevel()


def _model_and_trainer(kind: str, size: int, config: HfConfig) -> tuple[Any, Any]:
    specials = list(SPECIALS)
    alphabet = pre.ByteLevel.alphabet() if config.pre_tokenizer == "byte-level" else []
    common = {"vocab_size": size, "special_tokens": specials, "show_progress": False}
    if kind == "unigram-hf":
        trainer = trainers.UnigramTrainer(
            **common, unk_token=SPECIALS[UNK], initial_alphabet=alphabet,
            max_piece_length=config.max_piece_length,
        )  # fmt: skip
        return models.Unigram(), trainer
    merges = {
        **common, "min_frequency": config.min_frequency, "initial_alphabet": alphabet,
        "continuing_subword_prefix": "",
    }  # fmt: skip
    if kind == "wordpiece":  # its trainer takes no piece length limit
        model = models.WordPiece(unk_token=SPECIALS[UNK], continuing_subword_prefix="")
        return model, trainers.WordPieceTrainer(**merges)
    if kind == "bpe-hf":
        trainer = trainers.BpeTrainer(**merges, max_token_length=config.max_piece_length)
        return models.BPE(unk_token=SPECIALS[UNK]), trainer
    raise ValueError(f"unknown tokenizers model {kind!r}; choose from {', '.join(KINDS)}")


def train(sentences: Sequence[str], kind: str, size: int, config: HfConfig) -> Tokenizer:
    """A `tokenizers` vocabulary of about `size` pieces trained on `sentences`, the same
    for the same sentences (see the module's note on determinism)."""
    model, trainer = _model_and_trainer(kind, size, config)
    tok = Tokenizer(model)
    tok.normalizer = _normalizer(config.normalizer)
    tok.pre_tokenizer = _pre_tokenizer(config)
    tok.decoder = _decoder(config)
    tok.train_from_iterator(iter(sentences), trainer, length=len(sentences))
    if kind == "unigram-hf":
        tok = _settled_unigram(tok)
    return _finished(tok)


def _settled_unigram(tok: Tokenizer) -> Tokenizer:
    """Unigram scores made a function of the data (the module's note): float32, the
    coverage-only characters at one score below the least multi-character piece, pieces
    numbered by score then spelling, specials first and unreachable from text."""
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    rest = [(piece, float(np.float32(score))) for piece, score in vocab[len(SPECIALS) :]]
    longer = [score for piece, score in rest if len(piece) > 1]
    floor = min(longer) if longer else min((score for _, score in rest), default=0.0)
    below = float(np.float32(floor - 1.0))
    rest = [(p, s if len(p) > 1 or s >= floor else below) for p, s in rest]
    rest.sort(key=lambda ps: (-ps[1], ps[0]))
    doc["model"]["vocab"] = [[s, _UNREACHABLE] for s in SPECIALS] + [list(ps) for ps in rest]
    doc["model"]["unk_id"] = UNK
    return Tokenizer.from_str(json.dumps(doc))


def _finished(tok: Tokenizer) -> Tokenizer:
    """The trainer put fairseq's specials first; registered and `</s>` appended as in
    every nmtpipe `tokenizer.json`."""
    for i, name in enumerate(SPECIALS):
        if tok.token_to_id(name) != i:
            raise AssertionError(f"{name} is not id {i} of the trained vocabulary")
    tokenizer_json.finish(tok, list(SPECIALS), [BOS, PAD, EOS], UNK, EOS)
    return tok


def pieces(tok: Tokenizer) -> list[str]:
    """The pieces in id order."""
    return [tok.id_to_token(i) for i in range(tok.get_vocab_size(with_added_tokens=False))]


def padded(tok: Tokenizer, size: int) -> Tokenizer:
    """`tok` with fairseq's `madeupwordNNNN` entries up to `size` ids (no merge or score
    lets text produce them where the model decides; WordPiece could match one typed
    verbatim inside a word, which its dictionary also holds)."""
    have = tok.get_vocab_size(with_added_tokens=False)
    if size <= have:
        return tok
    extra = [f"madeupword{k:04d}" for k in range(size - have)]
    doc = json.loads(tok.to_str())
    model = doc["model"]
    if model["type"] == "Unigram":
        model["vocab"] += [[w, _UNREACHABLE] for w in extra]
    else:
        model["vocab"].update({w: have + k for k, w in enumerate(extra)})
    return Tokenizer.from_str(json.dumps(doc))


def for_encoding(data: bytes) -> Tokenizer:
    """A committed `tokenizer.json` ready to encode raw text as nmtpipe does: typed
    special spellings (`</s>`) are text, not specials."""
    tok = Tokenizer.from_str(data.decode("utf-8"))
    tok.encode_special_tokens = True
    return tok


def piece_counts(tok: Tokenizer, sentences: Sequence[str]) -> list[int]:
    """How often each id occurs when `tok` encodes `sentences` (without `</s>`)."""

    def encode(lines: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch_fast(list(lines), add_special_tokens=False)]

    batches = (encode(sentences[i : i + _BATCH]) for i in range(0, len(sentences), _BATCH))
    return id_counts(batches, tok.get_vocab_size(with_added_tokens=False))


def describe_size(kind: str, asked: int, got: int) -> str | None:
    """Why a trained vocabulary's size differs from the one asked for, if it does."""
    if got == asked:
        return None
    if got > asked:
        return (
            f"{kind} needs {got} pieces to cover every character of the sample "
            f"({asked} asked): raise --vocab-size or use --hf-pre-tokenizer byte-level"
        )
    share = math.floor(100 * got / asked)
    return f"the sample supports {got} {kind} pieces, {share}% of the {asked} asked"
