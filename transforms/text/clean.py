"""Turn one chunk of raw lines into kept pairs, rejects and token counts.

This is the hot path of `prepare`. It works on the whole chunk at once: one decode of
the chunk's bytes, one normalisation call per side, numpy for the filters and the
hash-derived placements, Arrow for the output batches. Python-level work per line is
kept to a few list operations. Exact duplicates are not removed here: all copies of a
pair land in the same shard, and the shard writer drops them and takes their tokens
back out of the counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.corpus.raw_corpus import RawChunk, decode_lines
from nmtpipe.transforms.storage.encodings import UTF8
from nmtpipe.transforms.text import filters
from nmtpipe.transforms.text.filters import FilterConfig, Verdict
from nmtpipe.transforms.text.langid import function_words
from nmtpipe.transforms.text.langid.identifier import (
    PENDING,
    LangIdConfig,
    LanguageIdentifier,
    uses_words,
)
from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer
from nmtpipe.transforms.text.records import Reject, pair_batch
from nmtpipe.transforms.text.side_text import SideText, look
from nmtpipe.transforms.text.split import SPLITS, Placer, SplitConfig
from nmtpipe.transforms.text.zh_script import ScriptConverter

SIDES = ("src", "tgt")
RATIO_BINS = 10  # length-ratio histogram bins per unit (0.1 wide)
RATIO_MAX = 20  # ratios above it share the last bin


@dataclass(frozen=True)
class CleanConfig:
    """How a chunk is cleaned: each side's normalisation and Chinese script conversion
    (an OpenCC target, or None), the filters, language identification, the split."""

    normalize: NormalizeConfig = NormalizeConfig()
    tgt_normalize: NormalizeConfig | None = None  # None: as the source
    filters: FilterConfig = FilterConfig()
    split: SplitConfig = SplitConfig()
    langid: LangIdConfig = LangIdConfig()
    convert: tuple[str | None, str | None] = (None, None)

    def side_normalize(self, side: str) -> NormalizeConfig:
        if side == "tgt" and self.tgt_normalize is not None:
            return self.tgt_normalize
        return self.normalize


@dataclass
class CleanedChunk:
    """What one chunk contributes: kept pairs by (split, shard), rejects, and the T2T
    tokens of its train pairs' sides, to be counted (duplicates included: the shard
    writer takes those back)."""

    pairs: dict[tuple[str, int], pa.RecordBatch] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    train_tokens: tuple[pa.StringArray, pa.StringArray] = (pa.array([], pa.string()),) * 2
    # Pairs only lingua's accurate models can judge, when the cleaner defers them: by
    # (split, shard) like `pairs`, with the lines as read in train too (for the rejects).
    pending: dict[tuple[str, int], pa.RecordBatch] = field(default_factory=dict)
    pairs_read: int = 0
    converted: dict[str, int] = field(default_factory=dict)  # lines changed by OpenCC, per side
    ratio_hist: dict[int, int] = field(default_factory=dict)  # length ratios x RATIO_BINS


def _split_pairs(chunk: RawChunk) -> tuple[list[str], list[str], dict[int, Reject]]:
    """Decoded source and target lines, and the lines rejected before normalisation
    (those the reader could take no pair from among them)."""
    early: dict[int, Reject] = {}

    def reject(i: int, reason: str, detail: str, src: bytes | None, tgt: bytes | None) -> None:
        early[i] = Reject(chunk.origin, chunk.first_line + i, reason, detail, src, tgt)

    for unread in chunk.unread:
        reject(unread.index, unread.reason, unread.detail, unread.src, unread.tgt)
    assert chunk.tgt is not None, "a reader gives pairs (a TSV file's are split where loaded)"
    src_in, tgt_in = (UTF8, UTF8) if chunk.decoded else chunk.encodings
    src, bad_src = decode_lines(chunk.src, "src", src_in)
    tgt, bad_tgt = decode_lines(chunk.tgt, "tgt", tgt_in)
    for i in sorted(bad_src.keys() | bad_tgt.keys()):
        if i in early:
            continue
        found = [bad[i] for bad in (bad_src, bad_tgt) if i in bad]
        detail = "; ".join(detail for _, detail, _ in found)
        src_raw = bad_src[i][2] if i in bad_src else src[i].encode()
        tgt_raw = bad_tgt[i][2] if i in bad_tgt else tgt[i].encode()
        reject(i, found[0][0], detail, src_raw, tgt_raw)
    return src, tgt, early


class ChunkCleaner:
    """Callable `RawChunk -> CleanedChunk`; holds the normalisers, converters and the
    language identifier, so build one per worker.

    With `defer`, the identifier never loads lingua's accurate models: a pair only they
    can judge is placed but left `pending`, for a `PairConfirmer`. A `judge` (the pair
    scorers that learn nothing: `quality/judge.py`) rejects more of the training input's
    pairs that pass the filters."""

    def __init__(
        self,
        config: CleanConfig,
        defer: bool = False,
        judge: Callable[[list[str], list[str]], dict[int, Verdict]] | None = None,
    ) -> None:
        self.config = config
        self._judge = judge
        self._normalize = [Normalizer(config.side_normalize(side)) for side in SIDES]
        self._convert = [None if s is None else ScriptConverter(s) for s in config.convert]  # type: ignore[arg-type]
        self._langid = _identifier(config.langid, confirm=not defer)
        self._placer = Placer(config.split)

    def __call__(self, chunk: RawChunk) -> CleanedChunk:
        out = CleanedChunk()
        raw = _split_pairs(chunk)
        early = raw[2]
        out.pairs_read = len(raw[0])
        sides = []
        for k, side in enumerate(SIDES):
            lines = self._normalize[k].batch(raw[k])
            convert = self._convert[k]
            if convert is not None:
                lines, out.converted[side] = convert(lines)
            sides.append(lines)
        src, tgt = sides
        looked = (look(src), look(tgt))
        verdicts = filters.check_pairs(*looked, self.config.filters)
        out.ratio_hist = _ratio_hist(*looked)
        if self._judge is not None and chunk.role == "train":
            alive = [i for i in range(len(src)) if i not in early and i not in verdicts]
            judged = self._judge([src[i] for i in alive], [tgt[i] for i in alive])
            verdicts.update((alive[row], verdict) for row, verdict in judged.items())
        # A valid or test set the user gave is a reference set (scores are compared on
        # all of it, as sacreBLEU's are): the model does not second-guess its languages.
        pending: set[int] = set()
        if self._langid is not None and chunk.role == "train":
            gone = early.keys() | verdicts.keys()
            pending = identify(self._langid, self.config.langid, looked, gone, verdicts)
        for i in sorted(early.keys() | verdicts.keys()):
            if i in early:
                out.rejects.append(early[i])
            else:
                reason, detail = verdicts[i]
                line = chunk.first_line + i
                out.rejects.append(
                    Reject(
                        chunk.origin, line, reason, detail, raw[0][i].encode(), raw[1][i].encode()
                    )
                )
        keep = [i for i in range(len(src)) if i not in early and i not in verdicts]
        settled = [i for i in keep if i not in pending]
        if settled:
            train = np.zeros(len(src), dtype=bool)
            train[self._place(chunk, sides, raw[:2], settled, out.pairs)] = True
            out.train_tokens = (looked[0].tokens_of(train), looked[1].tokens_of(train))
        if pending:
            self._place(chunk, sides, raw[:2], sorted(pending), out.pending, raw_in_train=True)
        return out

    def _place(
        self,
        chunk: RawChunk,
        sides: Sequence[list[str]],
        read: Sequence[list[str]],
        keep: list[int],
        batches: dict[tuple[str, int], pa.RecordBatch],
        raw_in_train: bool = False,
    ) -> np.ndarray:
        """Add the pairs `keep` (rows of the chunk) to `batches` by (split, shard), with
        the lines as `read` where normalisation changed them (valid and test pairs only,
        unless `raw_in_train`). Returns the rows that went to the train split."""
        src, tgt = ([side[i] for i in keep] for side in sides)
        placed = self._placer.place(src, tgt, chunk.role)
        order = np.lexsort((placed.shards, placed.splits))
        keys = placed.splits[order] * (1 << 32) + placed.shards[order]
        lines = np.asarray(keep, dtype=np.int64) + chunk.first_line
        for group in np.split(order, np.flatnonzero(np.diff(keys)) + 1):
            g = group.tolist()
            key = (SPLITS[placed.splits[g[0]]], int(placed.shards[g[0]]))
            texts = ([src[i] for i in g], [tgt[i] for i in g])
            raw = None
            if key[0] != "train" or raw_in_train:  # the lines as read, only where needed
                rows = [keep[i] for i in g]
                src_raw, tgt_raw = (
                    _changed([side[r] for r in rows], text)
                    for side, text in zip(read, texts, strict=True)
                )
                raw = (src_raw, tgt_raw)
            ids, at = pa.array(placed.ids[group]), pa.array(lines[group])
            batches[key] = pair_batch(chunk.origin, ids, *texts, at, raw)
        return np.asarray(keep)[placed.splits == SPLITS.index("train")]


def _identifier(config: LangIdConfig, confirm: bool) -> LanguageIdentifier | None:
    if not config.enabled:
        return None
    return LanguageIdentifier(config.threshold, config.min_letters, confirm)


def identify(
    langid: LanguageIdentifier,
    config: LangIdConfig,
    sides: tuple[SideText, SideText],
    gone: set[int],
    verdicts: dict[int, Verdict],
) -> set[int]:
    """Add a `wrong-language` verdict for each pair not in `gone` with a side not in its
    declared language (the source is looked at first, the target for the rest). Returns
    the pairs left `PENDING` by an identifier that may not confirm: their target is not
    looked at either, so that the confirmer judges them whole, as here."""
    alive = [i for i in range(len(sides[0].lines)) if i not in gone]
    pending: set[int] = set()
    for k, lang in enumerate((config.src, config.tgt)):
        if lang is None or not alive:
            continue
        side = sides[k]
        lines = [side.lines[i] for i in alive]
        hits = function_words.side_hits(side)[alive] if uses_words(lang) else None
        for j, found in langid.wrong(lines, lang, side.scripts[alive], hits).items():
            if found is PENDING:
                pending.add(alive[j])
                continue
            verdicts[alive[j]] = Verdict(
                filters.WRONG_LANGUAGE,
                f"{SIDES[k]} is {found.language} ({found.confidence:.2f}; {found.evidence}),"
                f" not {lang}",
            )
        alive = [i for i in alive if i not in verdicts and i not in pending]
    return pending


@dataclass
class Confirmed:
    """What confirming one batch of pending pairs gave: the kept pairs (a batch like
    the cleaner's) and which rows of the batch they are, the rejects, the kept train
    pairs' T2T tokens per side."""

    pairs: pa.RecordBatch
    kept: np.ndarray
    rejects: list[Reject]
    train_tokens: tuple[pa.StringArray, pa.StringArray]


class PairConfirmer:
    """Callable `(split, pending batch) -> Confirmed`: the pairs a deferring
    `ChunkCleaner` left pending, judged as a non-deferring one judges them (lingua's
    accurate models load here, once per worker that gets any)."""

    def __init__(self, config: LangIdConfig) -> None:
        self.config = config
        self._langid = _identifier(config, confirm=True)

    def __call__(self, split: str, batch: pa.RecordBatch) -> Confirmed:
        texts = [batch.column(side).to_pylist() for side in SIDES]
        read = [batch.column(f"{side}_raw").to_pylist() for side in SIDES]
        looked = (look(texts[0]), look(texts[1]))
        verdicts: dict[int, Verdict] = {}
        assert self._langid is not None
        identify(self._langid, self.config, looked, set(), verdicts)
        origins, lines = batch.column("origin").to_pylist(), batch.column("line").to_pylist()

        def as_read(k: int, i: int) -> bytes:
            return (texts[k][i] if read[k][i] is None else read[k][i]).encode()

        rejects = [
            Reject(origins[i], lines[i], *verdicts[i], as_read(0, i), as_read(1, i))
            for i in sorted(verdicts)
        ]
        keep = np.ones(batch.num_rows, dtype=bool)
        keep[list(verdicts)] = False
        kept = batch.filter(pa.array(keep))
        empty = pa.array([], pa.string())
        if split != "train":
            return Confirmed(kept, keep, rejects, (empty, empty))
        nulls = pa.nulls(kept.num_rows, pa.string())
        kept = kept.set_column(5, "src_raw", nulls).set_column(6, "tgt_raw", nulls)
        tokens = (looked[0].tokens_of(keep), looked[1].tokens_of(keep))
        return Confirmed(kept, keep, rejects, tokens)


def _changed(read: list[str], kept: list[str]) -> list[str | None]:
    """Each line as read where normalisation changed it, else None."""
    return [line if line != text else None for line, text in zip(read, kept, strict=True)]


def _ratio_hist(src: SideText, tgt: SideText) -> dict[int, int]:
    """Histogram of the length ratios of every pair with two non-empty sides, rejected
    or not, in bins of 1/RATIO_BINS: what the report draws against the limit."""
    ratio = filters.length_ratios(src, tgt)
    both = (src.lengths > 0) & (tgt.lengths > 0)
    bins = np.minimum(np.rint(ratio[both] * RATIO_BINS), RATIO_MAX * RATIO_BINS).astype(np.int64)
    counted = np.bincount(bins)
    nonzero = np.flatnonzero(counted)
    return dict(zip(nonzero.tolist(), counted[nonzero].tolist(), strict=True))
