"""What a vocabulary kind is: one class that knows its options, how it builds one side
from token counts or a sample, the files it writes, its id layout, its encoder, and what
export needs.

`nmtpipe vocab --model NAME` picks a kind from `registry.py`; the vocab step
(`pipelines/workflow/vocab.py`) draws the sample a kind asks for (`VocabKind.sample`) in
Beam, as its graph, before any side is built, and the driver writes and commits what the
kind builds; `vocabulary.py` opens a committed vocabulary through the same kind. The shape is
seqio's `Vocabulary` (one class per kind, the special ids a property of the class) and
fairseq's `data/encoders` registry; a new kind is a module here (its class and its config)
and a line in the registry, which gives the command its config's options.
"""

from __future__ import annotations

import dataclasses
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.options import option
from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ, IdLayout
from nmtpipe.transforms.vocab.memory import check_fits
from nmtpipe.transforms.vocab.sample import BudgetSample, IdSample
from nmtpipe.transforms.vocab.tokenizer_json import NotExpressible


class Options(Protocol):
    """The options of `nmtpipe vocab` every kind builds with (`VocabConfig`'s own); a
    kind's own options are its config, in the field named as the kind (`VocabKind.config`)."""

    model: str
    vocab_size: int


# a config's fields whose defaults depend on the command's option values (by name)
Defaults = Mapping[str, Callable[[Mapping[str, Any]], Any]]


class Source(Protocol):
    """What a kind builds from, as the driver gives it: the options, the prepared
    datasets' manifests (and so their token counts), the lines of a side's sample (the
    kind's `sample`, drawn in Beam before the build), and where to say what a user
    should know."""

    options: Options
    parts: list[tuple[str, dict[str, Any]]]
    spill: str | None  # a local folder for what a build keeps on disk (None: TMPDIR)

    def sample(self, side: str) -> list[str]: ...

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

    NAME: str  # its config's field in `VocabConfig`
    TITLE: str  # what it is, its options' help group before the `--model` names
    MODELS: tuple[str, ...]  # the `--model` names this class serves
    # a regular expression of the file names it writes (side infix included)
    FILE_PATTERN: str
    # its options, beside model, vocab_size and joined: a frozen dataclass of `option()`
    # fields (and fields set from them by CONFIG_DEFAULTS)
    Config: type
    # the Config fields whose defaults depend on the command's other options (`nested`)
    CONFIG_DEFAULTS: ClassVar[Defaults] = {}
    layout: IdLayout = FAIRSEQ  # the special ids of the vocabulary's own id space
    # whether it encodes in native code that releases the GIL, so that threads of one
    # process encode on several cores
    encodes_outside_gil: bool = True
    # why no `tokenizer.json` reproduces it (export refuses it in one line), if so
    export_refusal: str | None = None

    def __init__(self, model: str) -> None:
        self.model = model

    @classmethod
    def group(cls) -> str:
        """Its options' help group: `SentencePiece (--model unigram|bpe)`."""
        return f"{cls.TITLE} (--model {'|'.join(cls.MODELS)})"

    def config(self, options: Options) -> Any:
        """Its own options (a `Config`) among the command's."""
        return getattr(options, self.NAME)

    def options(self, config: Any) -> dict[str, Any]:
        """The options of `config` that shape the output, as the manifest records and
        the fingerprint hashes them."""
        return dataclasses.asdict(config)

    @abstractmethod
    def files(self, side: str) -> list[str]:
        """The file names of one side's vocabulary (`joined` has no language in them)."""

    def special_ids(self, options: Options) -> dict[str, Any]:
        """The id layouts of the vocabulary and of its fairseq dictionaries."""
        return {"vocabulary": self.layout.as_dict(), "fairseq": FAIRSEQ.as_dict()}

    def sample(self, options: Options, pairs: int) -> IdSample | BudgetSample | None:
        """The lines of the training split (of `pairs` pairs) its build reads
        (`Source.sample`), drawn in Beam before any side is built; None: it reads none."""
        return None

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


@dataclass(frozen=True)
class SampledConfig:
    """The options of the kinds trained on a sample of the training split's sentences
    (each kind's config derives from it, so that they share the one option)."""

    sample_sentences: int = option(
        1_000_000,
        metavar="N",
        help="train on about N pairs' sentences, drawn by hash (SentencePiece and tokenizers)",
    )

    def __post_init__(self) -> None:
        if self.sample_sentences < 1:
            raise ConfigError("--sample-sentences must be at least 1")


class SampledKind(VocabKind):
    """A kind trained on a sample of sentences; its config is a `SampledConfig`."""

    def options(self, config: Any) -> dict[str, Any]:
        """The sample's options, then the kind's own under its name: the layout its
        manifests have always had, so that their fingerprints hold."""
        own = dataclasses.asdict(config)
        shared = {f.name: own.pop(f.name) for f in dataclasses.fields(SampledConfig)}
        return {**shared, self.NAME: own}

    def sample(self, options: Options, pairs: int) -> IdSample:
        """About `sample_sentences` of the `pairs` pairs, chosen by pair id."""
        return IdSample(min(1.0, self.config(options).sample_sentences / max(pairs, 1)))

    def sample_sentences(
        self,
        source: Source,
        side: str,
        report: dict[str, Any],
        trainer: str,
        bytes_per_character: float,
    ) -> list[str]:
        """The sentences of `side` in the sample (`sample`); refused in one line, before
        `trainer` starts, where they would need more memory than this machine has
        (`bytes_per_character` of the sample's text, as measured)."""
        pairs = sum(doc["splits"]["train"]["pairs"] for _, doc in source.parts)
        fraction = self.sample(source.options, pairs).fraction
        sentences = source.sample(side)
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
