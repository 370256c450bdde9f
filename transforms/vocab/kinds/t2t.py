"""Tensor2Tensor's SubwordTextEncoder as a vocabulary kind (`--model t2t`).

Built from the token counts `prepare` committed, or from T2T's byte-budget line sample,
by T2T's bisection over min_count (`subword_build.py`). Its own ids put `<pad>`=0 and
`<EOS>`=1 first; its fairseq dictionary lists every subtoken from id 2 on, so that
fairseq id = T2T id + 2 (`id_layout.py`). It encodes in Python, and no `tokenizer.json`
reproduces its escaping, so export refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.progress import Progress
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
from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
from nmtpipe.transforms.vocab.kinds.subword_build import SubwordBuilder
from nmtpipe.transforms.vocab.sample import BudgetSample


class T2tKind(VocabKind):
    MODELS = ("t2t",)
    FILE_PATTERN = r"vocab(\.[^/]+)?\.subwords"
    OPTIONS = (
        "max_subtoken_length",
        "file_byte_budget",
        "max_tokens_in_memory",
        "reserved_tokens",
        "min_count_bounds",
    )
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
        return {**super().special_ids(options), "reserved_tokens": list(options.reserved_tokens)}

    def build(self, source: Source, side: str, report: dict[str, Any]) -> BuiltSide:
        counts = _counts(source, side, report)
        encoder = _encoder(source.options, counts, side, report)
        text = encoder.to_text().encode()
        return BuiltSide([text], _dict_text(encoder, counts), encoder.vocab_size)

    def encoder(self, data: bytes, dictionary_size: int) -> SideEncoder:
        return T2tEncoder(SubwordTextEncoder.from_text(data.decode("utf-8")), dictionary_size)


def _counts(source: Source, side: str, report: dict[str, Any]) -> dict[str, int]:
    """The token counts T2T builds from: prepare's counts, or a byte-budget sample's."""
    options = source.options
    cap = options.max_tokens_in_memory
    if options.file_byte_budget is None:
        found = [counts_lib.count_files(root, doc, side) for root, doc in source.parts]
        if len(found) == 1:  # bucket files of one dataset hold disjoint tokens
            urls, report["distinct_tokens"] = found[0]
            counts = counts_lib.read_counts(urls, cap)
        else:
            counts = counts_lib.sum_counts([urls for urls, _ in found], cap)
            report["distinct_tokens"] = len(counts)
    else:
        lines = source.sample(BudgetSample(options.file_byte_budget), side)
        report["sampled_lines"] = len(lines)
        counts = dict(t2t_tokenizer.count_tokens(lines))
        report["distinct_tokens"] = len(counts)
        if cap is not None:
            counts = dict(sorted(counts.items(), key=lambda tc: (-tc[1], tc[0]))[:cap])
    report["distinct_tokens_used"] = len(counts)
    return counts


def _encoder(
    options: Options, counts: dict[str, int], side: str, report: dict[str, Any]
) -> SubwordTextEncoder:
    """T2T's build_to_target_size; a target the data cannot reach is an error."""
    if not counts:
        raise InputError(f"the training split has no tokens for {side}")
    builder = SubwordBuilder(counts, options.max_subtoken_length, options.reserved_tokens)
    lo, hi = options.min_count_bounds
    # A bisection over [lo, hi] builds at most this many times.
    with Progress(f"vocab {side}", (hi - lo + 1).bit_length(), "build") as shown:
        vocab, trace = builder.build_to_target_size(
            options.vocab_size, lo, hi, lambda m, n: shown.update(1, min_count=m, size=n)
        )
    report["bisection"] = [{"min_count": m, "vocab_size": n} for m, n in trace.steps]
    report["min_count"] = trace.chosen
    largest = max(n for _, n in trace.steps)
    if largest * 100 < options.vocab_size * 99:
        raise ConfigError(
            f"--vocab-size {options.vocab_size} is more than this data supports for {side}: "
            f"the largest vocabulary it gives is {largest} subtokens (min_count "
            f"{options.min_count_bounds[0]}); choose --vocab-size {largest} or less"
        )
    return SubwordTextEncoder(vocab)


def _dict_text(encoder: SubwordTextEncoder, counts: dict[str, int]) -> str:
    """fairseq dict: every subtoken after `<pad>` and `<EOS>` (further reserved tokens
    included), counted over the tokens, so that fairseq id = T2T id + 2 throughout."""
    totals = np.zeros(encoder.vocab_size, dtype=np.int64)
    for token, count in counts.items():
        for i in encoder.token_ids(token):
            totals[i] += count
    first = T2T.first_symbol
    return dict_text(list(encoder.subtokens[first:]), totals[first:].tolist())


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
