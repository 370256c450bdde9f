"""What a vocabulary kind is: one class that knows its options, how it builds one side
from token counts or a sample, the files it writes, its id layout, its encoder, and what
export needs.

`nmtpipe vocab --model NAME` picks a kind from `registry.py`; the driver
(`pipelines/workflow/vocab.py`) draws samples in Beam and writes and commits what the kind
builds; `vocabulary.py` opens a committed vocabulary through the same kind. The shape is
seqio's `Vocabulary` (one class per kind, the special ids a property of the class) and
fairseq's `data/encoders` registry; a new kind is a module here and a line in the registry.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ, IdLayout
from nmtpipe.transforms.vocab.memory import check_fits
from nmtpipe.transforms.vocab.sample import BudgetSample, IdSample
from nmtpipe.transforms.vocab.tokenizer_json import NotExpressible


class Options(Protocol):
    """The options of `nmtpipe vocab` a kind builds with (`VocabConfig`'s fields)."""

    model: str
    vocab_size: int
    max_subtoken_length: int | None
    file_byte_budget: float | None
    max_characters: int
    reserved_tokens: tuple[str, ...]
    min_count_bounds: tuple[int, int]
    sample_sentences: int
    spm: Any
    hf: Any


class Source(Protocol):
    """What a kind builds from, as the driver gives it: the options, the prepared
    datasets' manifests (and so their token counts), lines of a side drawn in Beam, and
    where to say what a user should know."""

    options: Options
    parts: list[tuple[str, dict[str, Any]]]

    def sample(self, selector: IdSample | BudgetSample, side: str) -> list[str]: ...

    def log(self, text: str) -> None: ...


@dataclass(frozen=True)
class BuiltSide:
    """One side's vocabulary as built, for the driver to write: the contents of the
    kind's `files(side)` in order, the fairseq dictionary's text, the size recorded in
    the manifest, and further files written beside it (name, bytes, manifest kind)."""

    files: list[bytes]
    dict_text: str
    vocab_size: int
    extras: list[tuple[str, bytes, str]] = field(default_factory=list)


class SideEncoder(ABC):
    """One language's vocabulary: `encode_batch` turns lines into ids ending in EOS,
    `decode` ids back into text."""

    layout: IdLayout
    vocab_size: int

    def __init__(self, layout: IdLayout, dictionary_size: int) -> None:
        self.layout = layout
        self.dictionary_size = dictionary_size

    @abstractmethod
    def encode_batch(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The ids of every line, EOS appended, concatenated (int32), and each line's
        length including EOS (int64)."""

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str:
        """The text of ids in this vocabulary's own space (without EOS)."""

    @abstractmethod
    def piece(self, i: int) -> str:
        """Id `i`'s piece as the vocabulary writes it (`▁the` for SentencePiece, `the_`
        for T2T), in this vocabulary's own id space: unlike `decode`, it shows where
        words start or end."""

    @abstractmethod
    def outside(self, tokens: Sequence[str]) -> np.ndarray:
        """Which tokens this vocabulary cannot spell with its own pieces."""

    def unknowns(self, ids: np.ndarray) -> int:
        """How many ids are `<unk>` (a T2T vocabulary escapes instead: never any)."""
        return 0 if self.layout.unk is None else int(np.count_nonzero(ids == self.layout.unk))


class VocabKind(ABC):
    """A kind of vocabulary, for one `--model` name (an instance per name: `bpe` and
    `unigram` are one SentencePiece class)."""

    MODELS: tuple[str, ...]  # the `--model` names this class serves
    # a regular expression of the file names it writes (side infix included)
    FILE_PATTERN: str
    # the `VocabConfig` fields that shape its output, beside model, vocab_size and joined
    OPTIONS: tuple[str, ...]
    layout: IdLayout = FAIRSEQ  # the special ids of the vocabulary's own id space
    # whether it encodes in native code that releases the GIL, so that threads of one
    # process encode on several cores
    encodes_outside_gil: bool = True
    # why no `tokenizer.json` reproduces it (export refuses it in one line), if so
    export_refusal: str | None = None

    def __init__(self, model: str) -> None:
        self.model = model

    @abstractmethod
    def files(self, side: str) -> list[str]:
        """The file names of one side's vocabulary (`joined` has no language in them)."""

    def special_ids(self, options: Options) -> dict[str, Any]:
        """The id layouts of the vocabulary and of its fairseq dictionaries."""
        return {"vocabulary": self.layout.as_dict(), "fairseq": FAIRSEQ.as_dict()}

    @abstractmethod
    def build(self, source: Source, side: str, report: dict[str, Any]) -> BuiltSide:
        """`side`'s vocabulary built from `source`, what it was built from noted in
        `report`."""

    @abstractmethod
    def encoder(self, data: bytes, dictionary_size: int) -> SideEncoder:
        """The encoder of a committed vocabulary file (the first of `files`)."""

    def tokenizer(self, data: bytes, size: int) -> Any:
        """The `tokenizers.Tokenizer` giving the same ids, padded to `size` ids, for
        export; NotExpressible where none does."""
        raise NotExpressible(self.export_refusal or f"{self.model} vocabularies")


def infix(side: str) -> str:
    """The part of a file name that names the side (none for a joined vocabulary)."""
    return "" if side == JOINED else f".{side}"


def sample_sentences(
    source: Source, side: str, report: dict[str, Any], trainer: str, bytes_per_character: float
) -> list[str]:
    """About `sample_sentences` pairs' sentences of `side`, chosen by pair id; refused
    in one line, before `trainer` starts, where they would need more memory than this
    machine has (`bytes_per_character` of the sample's text, as measured)."""
    pairs = sum(doc["splits"]["train"]["pairs"] for _, doc in source.parts)
    fraction = min(1.0, source.options.sample_sentences / max(pairs, 1))
    sentences = source.sample(IdSample(fraction), side)
    characters = sum(map(len, sentences))
    report["sample_sentences"] = len(sentences)
    report["sample_characters"] = characters
    if not sentences:
        raise InputError(f"the training split has no sentences for {side}")
    per_pair = characters * bytes_per_character / (fraction * pairs)
    check_fits(
        f"{trainer} on {len(sentences):,} sentences of {side} ({characters:,} characters)",
        int(characters * bytes_per_character),
        per_pair,
        "--sample-sentences",
    )
    return sentences


def flat_ids(encoded: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lines' ids (EOS already appended) concatenated as int32, and their lengths."""
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    flat = np.fromiter(itertools.chain.from_iterable(encoded), np.int32, int(lengths.sum()))
    return flat, lengths
