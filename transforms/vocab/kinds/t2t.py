"""Tensor2Tensor's SubwordTextEncoder as a vocabulary kind (`--model t2t`).

Built from the token counts `prepare` committed, or from T2T's byte-budget line sample,
by T2T's bisection over min_count (`subword_build.py`). Its own ids put `<pad>`=0 and
`<EOS>`=1 first; its fairseq dictionary lists every subtoken from id 2 on, so that
fairseq id = T2T id + 2 (`id_layout.py`). It encodes in Python, and no `tokenizer.json`
reproduces its escaping, so export refuses it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.options import comma_list, number_pair, option
from nmtpipe.transforms.progress import Progress, heartbeat
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.vocab import counts as counts_lib
from nmtpipe.transforms.vocab.fairseq_dict import dict_text
from nmtpipe.transforms.vocab.id_layout import T2T
from nmtpipe.transforms.vocab.kinds.base import (
    BuiltSide,
    Options,
    SideEncoder,
    Source,
    VocabKind,
    infix,
)
from nmtpipe.transforms.vocab.kinds.subword import (
    RESERVED_TOKENS,
    SubwordTextEncoder,
    check_reserved,
)
from nmtpipe.transforms.vocab.kinds.subword_build import SubwordBuilder
from nmtpipe.transforms.vocab.memory import check_fits
from nmtpipe.transforms.vocab.sample import BudgetSample

# Threads building over chunks of the tokens (each holds its own chunk, from the same
# --max-characters): what a build gains from more stops around here.
MAX_THREADS = 4


@dataclass(frozen=True)
class T2tConfig:
    """How Tensor2Tensor's builder is run: on what sample, with what bounds."""

    max_subtoken_length: int | None = option(
        None,
        metavar="L",
        help="T2T's max_subtoken_length (subtokens up to L-1 characters); bounds the cost "
        "of long unspaced tokens",
    )
    file_byte_budget: float | None = option(
        None,
        metavar="B",
        help="build from T2T's generate_lines_for_vocab sample of B characters per language "
        "instead of all token counts",
    )
    max_characters: int = option(
        6_000_000,
        metavar="N",
        help="hold the tokens N characters at a time (about 150 bytes each on the "
        "driver), the rest waiting on local disk (under --output, or TMPDIR where it is "
        "remote); the vocabulary is the same whatever N; 0: all of them in memory",
    )
    reserved_tokens: tuple[str, ...] = option(
        RESERVED_TOKENS,
        parse=comma_list,
        metavar="T,...",
        help="reserved tokens, which must start with T2T's <pad>,<EOS>",
    )
    min_count_range: tuple[int, int] = option(
        (1, 1000),
        parse=number_pair(int, "1,1000"),
        metavar="LO,HI",
        help="bisection bounds for min_count (T2T: 1,1000)",
    )

    def __post_init__(self) -> None:
        if self.max_subtoken_length is not None and self.max_subtoken_length < 1:
            raise ConfigError("--max-subtoken-length must be at least 1")
        if self.file_byte_budget is not None and self.file_byte_budget <= 0:
            raise ConfigError("--file-byte-budget must be positive")
        if self.max_characters < 0:
            raise ConfigError("--max-characters must be 0 (no limit) or more")
        try:
            check_reserved(self.reserved_tokens)
        except ValueError as e:
            raise ConfigError(str(e)) from e


class T2tKind(VocabKind):
    NAME = "t2t"
    TITLE = "Tensor2Tensor subwords"
    MODELS = ("t2t",)
    FILE_PATTERN = r"vocab(\.[^/]+)?\.subwords"
    Config = T2tConfig
    layout = T2T
    encodes_outside_gil = False
    export_refusal = (
        "uses a Tensor2Tensor SubwordTextEncoder vocabulary, which no "
        "tokenizer.json reproduces; export models trained on a SentencePiece or "
        "tokenizers vocabulary (nmtpipe vocab --model unigram|bpe|bpe-hf|...)"
    )

    def files(self, side: str) -> list[str]:
        return [f"vocab{infix(side)}.subwords"]

    def special_ids(self, options: Options) -> dict[str, Any]:
        """Also the names of T2T's reserved tokens."""
        reserved = self.config(options).reserved_tokens
        return {**super().special_ids(options), "reserved_tokens": list(reserved)}

    def sample(self, options: Options, pairs: int) -> BudgetSample | None:
        """T2T's byte-budget line sample, with `file_byte_budget`; else none: the build
        reads prepare's token counts."""
        budget = self.config(options).file_byte_budget
        return None if budget is None else BudgetSample(budget)

    def build(self, source: Source, side: str, report: dict[str, Any]) -> BuiltSide:
        config: T2tConfig = self.config(source.options)
        with _builder(source, config, side, report) as builder:
            vocab = _build(config, source.options.vocab_size, builder, side, report)
            encoder = SubwordTextEncoder(vocab)
            used = builder.subtoken_counts(vocab)
        first = T2T.first_symbol  # fairseq id = T2T id + 2 throughout
        dictionary = dict_text(list(encoder.subtokens[first:]), used[first:].tolist())
        return BuiltSide([encoder.to_text().encode()], dictionary, encoder.vocab_size)

    def encoder(self, data: bytes, dictionary_size: int) -> SideEncoder:
        return T2tEncoder(SubwordTextEncoder.from_text(data.decode("utf-8")), dictionary_size)


def _builder(
    source: Source, config: T2tConfig, side: str, report: dict[str, Any]
) -> SubwordBuilder:
    """The builder, holding prepare's token counts (every one, `max_characters` at a
    time) and every character prepare counted, or T2T's byte-budget line sample."""
    make = functools.partial(
        SubwordBuilder,
        max_subtoken_length=config.max_subtoken_length,
        reserved_tokens=config.reserved_tokens,
        max_characters=config.max_characters,
        threads=min(len(os.sched_getaffinity(0)), MAX_THREADS),
        spill=source.spill,
    )
    if config.file_byte_budget is not None:
        lines = source.sample(side)
        report["sampled_lines"] = len(lines)
        counted = t2t_tokenizer.count_tokens(lines)
        report["distinct_tokens"] = len(counted)
        return make(counted)
    if config.max_characters:
        _fits(config.max_characters, side)
    # one row per distinct token of each prepared part (a refresh's parts are several)
    files = [counts_lib.count_files(root, doc, side) for root, doc in source.parts]
    rows = sum(part_rows for _, part_rows in files)
    report["count_rows"] = rows
    batches = (
        (batch["token"], batch["count"].to_numpy(zero_copy_only=False))
        for part_files, _ in files
        for batch in counts_lib.count_batches(part_files)
    )
    alphabet = {c for root, doc in source.parts for c in counts_lib.read_alphabet(root, doc, side)}
    with heartbeat(f"vocab {side}: reading the token counts"):
        builder = make(batches, characters="".join(sorted(alphabet)))
    if not config.max_characters:
        _fits(builder.chunks.size, side)
    report["characters"] = builder.chunks.size
    report["chunks"] = len(builder.chunks)
    if builder.chunks.spilled:
        source.log(
            f"{side}: {rows:,} token counts, {builder.chunks.size:,} characters, held "
            f"{config.max_characters:,} at a time (--max-characters) in "
            f"{len(builder.chunks)} chunks on local disk"
        )
    return builder


def _fits(characters: int, side: str) -> None:
    """Refuse, before the builds, to hold more characters than this machine can."""
    check_fits(
        f"the T2T vocabulary of {side} ({characters:,} characters at a time)",
        characters * SubwordBuilder.BYTES_PER_CHARACTER,
        SubwordBuilder.BYTES_PER_CHARACTER,
        "--max-characters",
    )


def _build(
    config: T2tConfig, vocab_size: int, builder: SubwordBuilder, side: str, report: dict[str, Any]
) -> list[str]:
    """T2T's build_to_target_size; a target the data cannot reach is an error."""
    if builder.chunks.size == 0:
        raise InputError(f"the training split has no tokens for {side}")
    lo, hi = config.min_count_range
    # A bisection over [lo, hi] builds at most this many times.
    with Progress(f"vocab {side}", (hi - lo + 1).bit_length(), "build") as shown:
        vocab, trace = builder.build_to_target_size(
            vocab_size, lo, hi, lambda m, n: shown.update(1, min_count=m, size=n)
        )
    report["bisection"] = [{"min_count": m, "vocab_size": n} for m, n in trace.steps]
    report["min_count"] = trace.chosen
    largest = max(n for _, n in trace.steps)
    if largest * 100 < vocab_size * 99:
        raise ConfigError(
            f"--vocab-size {vocab_size} is more than this data supports for {side}: "
            f"the largest vocabulary it gives is {largest} subtokens (min_count "
            f"{config.min_count_range[0]}); choose --vocab-size {largest} or less"
        )
    return vocab


class T2tEncoder(SideEncoder):
    def __init__(self, t2t: SubwordTextEncoder, dictionary_size: int) -> None:
        super().__init__(T2T, dictionary_size)
        self._t2t = t2t
        self.vocab_size = t2t.vocab_size

    def encode_batch(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return _with_eos(*self._t2t.encode_lines(list(lines)), self.layout.eos)

    def decode(self, ids: Sequence[int]) -> str:
        return self._t2t.decode(ids)

    def piece(self, i: int) -> str:
        return self._t2t.subtokens[i]

    def outside(self, tokens: Sequence[str]) -> np.ndarray:
        """Tokens with characters outside the alphabet (escaped as `\\NNN;`)."""
        alphabet = self._t2t.alphabet
        return np.fromiter(
            (any(c not in alphabet or c == "\n" for c in t) for t in tokens), bool, len(tokens)
        )


def _with_eos(flat: np.ndarray, lengths: np.ndarray, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated lines' ids with `eos` after each line."""
    ends = np.cumsum(lengths + 1) - 1
    out = np.full(flat.size + lengths.size, eos, dtype=np.int32)
    body = np.ones(out.size, dtype=bool)
    body[ends] = False
    out[body] = flat
    return out, lengths + 1
