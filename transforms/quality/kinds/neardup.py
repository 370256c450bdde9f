"""The near-duplicate scorer: pairs that repeat another pair but for punctuation,
spacing, case or a few characters, found by MinHash with locality-sensitive hashing.

A pair is compared as one text: both sides lowercased, NFKC-normalised and stripped of
everything but letters and digits, joined. A short text (`--neardup-min-chars`) is
compared as equal or not only: in Tatoeba's short sentences MinHash found 1,142 pairs
alike that are different sentences ("Go away." and "Get away!" beside one translation),
their 5-grams mostly the shared end of the line. Its keys are that text's hash (the same text
however it was punctuated or spaced) and, for each of `bands` bands, a hash of `rows`
MinHash values of its character 5-grams: two pairs whose 5-grams overlap by a Jaccard
similarity s share a band with probability 1 - (1 - s**rows)**bands (8 x 8: 0.99 at
s = 0.9, 0.03 at s = 0.5). Characters, not words, so that Chinese compares as English
does (shared/notes/pair-quality.md).

Which pair of a group stays (`RANK`) is decided in a prepare's shuffle of the keys
(`transforms/beam/quality.py`) and across the parts of a refreshed version
(`pipelines/workflow/refresh/version_overlap.py`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nmtpipe.transforms.options import option
from nmtpipe.transforms.quality.base import DuplicateKeys, Pairs
from nmtpipe.transforms.quality.tables import pair_keys
from nmtpipe.transforms.quality.units import (
    Ragged,
    code_points,
    distinct_code_points,
    hash_spans,
    of_each,
)
from nmtpipe.transforms.text.string_hash import mix64

# Who stays of a group of near-duplicates: a test pair over a valid one over a train one,
# then the smallest id.
RANK = {"test": 0, "valid": 1, "train": 2}
SHINGLE = 5
_END = "\U0010ffff" * (SHINGLE - 1)  # a noncharacter, after each text
_NOT_ALNUM = re.compile(r"[\W_]+")
_BASE = np.uint64(0x100000001B3)


@dataclass(frozen=True)
class NearDupConfig:
    neardup_bands: int = option(
        0,
        metavar="B",
        help="near-duplicate: MinHash bands (0: only pairs equal but for punctuation, "
        "spacing and case; 8 with 8 rows finds pairs a few characters apart, at about "
        "90 CPU-seconds a million pairs)",
    )
    neardup_rows: int = option(
        8,
        metavar="R",
        help="near-duplicate: MinHash values per band; more rows, fewer and closer near-duplicates",
    )
    neardup_min_chars: int = option(
        40,
        metavar="N",
        help="near-duplicate: compare pairs of fewer letters and digits (both sides) only "
        "as equal or not: a short sentence with a word changed is another sentence",
    )


def compared(src: Sequence[str], tgt: Sequence[str]) -> list[str]:
    """Each pair as the text compared: letters and digits of both sides, lowercased."""
    return [
        _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", s).lower())
        + "\x00"
        + _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", t).lower())
        for s, t in zip(src, tgt, strict=True)
    ]


def near_keys(src: Sequence[str], tgt: Sequence[str]) -> np.ndarray:
    """Each pair's key as pairs equal but for punctuation, spacing and case share it (a
    hash of what `compared` keeps of each side): the first key of every pair (whatever
    the bands), and what a refresh compares the parts of a version by
    (`pipelines/workflow/refresh/version_overlap.py`)."""
    return pair_keys(_side_keys(src), _side_keys(tgt))


def _side_keys(lines: Sequence[str]) -> np.ndarray:
    """A hash of each line's letters and digits, lowercased: `compared`'s side, its
    characters kept by a table of the distinct code points (a regular expression's
    substitution and a string per line cost most of this scorer's CPU)."""
    codes, bounds = code_points([unicodedata.normalize("NFKC", line).lower() for line in lines])
    distinct = distinct_code_points(codes)
    # What `_NOT_ALNUM` leaves: Python's \w but the underscore.
    alnum = np.array([chr(c).isalnum() for c in distinct.tolist()], dtype=bool)
    keep = of_each(codes, distinct, alnum)
    line = np.repeat(np.arange(len(lines)), np.diff(bounds))
    kept = np.bincount(line[keep], minlength=len(lines))
    return hash_spans(codes[keep], np.concatenate([[0], np.cumsum(kept)]).astype(np.int64))


def shingles(texts: list[str]) -> Ragged:
    """Each text's character 5-grams as 64-bit hashes, the last ones running into an
    end mark (so that a text shorter than five characters has one too)."""
    padded = "".join(text + _END for text in texts)
    codes = np.frombuffer(padded.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = np.concatenate([[0], np.cumsum(lengths + SHINGLE - 1)]).astype(np.int64)
    with np.errstate(over="ignore"):
        window = np.zeros(max(codes.size - SHINGLE + 1, 0), dtype=np.uint64)
        for k in range(SHINGLE):
            window = window * _BASE + codes[k : k + window.size]
    per = np.maximum(lengths, 1)  # grams starting at each character (one for an empty text)
    out_starts = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
    line = np.repeat(np.arange(len(texts)), per)
    at = starts[:-1][line] + np.arange(int(out_starts[-1])) - out_starts[:-1][line]
    return Ragged(mix64(window[at]), out_starts)


def minhashes(grams: Ragged, count: int) -> np.ndarray:
    """(lines, count): each line's minimum of `count` hash functions over its grams."""
    out = np.empty((len(grams.starts) - 1, count), dtype=np.uint64)
    for k in range(count):
        with np.errstate(over="ignore"):
            hashed = mix64(grams.values ^ np.uint64((k + 1) * 0x9E3779B97F4A7C15 % (1 << 64)))
        out[:, k] = np.minimum.reduceat(hashed, grams.starts[:-1]) if hashed.size else 0
    return out


class NearDupScorer(DuplicateKeys):
    NAME = "neardup"
    Config = NearDupConfig
    REASON = "near-duplicate"
    CATCHES = (
        "pairs repeating another but for punctuation, spacing, case or a few characters, "
        "within the corpus and against the valid and test pairs"
    )
    COSTS = (
        "bands x rows hash functions over each pair's character 5-grams, and one shuffle "
        "of (bands + 1) keys a pair, grouped in bounded partitions"
    )

    def keys(self, pairs: Pairs) -> np.ndarray:
        exact = near_keys(pairs.src, pairs.tgt)
        bands, rows = self.config.neardup_bands, self.config.neardup_rows
        if bands == 0 or not len(pairs):
            return exact[:, None]
        texts = compared(pairs.src, pairs.tgt)
        mins = minhashes(shingles(texts), bands * rows).reshape(len(texts), bands, rows)
        keys = np.empty((len(texts), bands + 1), dtype=np.uint64)
        keys[:, 0] = exact
        for band in range(bands):
            key = np.full(len(texts), band + 1, dtype=np.uint64)
            for row in range(rows):
                key = pair_keys(key, mins[:, band, row])
            keys[:, band + 1] = key
        short = np.fromiter(map(len, texts), dtype=np.int64) < self.config.neardup_min_chars + 1
        keys[short, 1:] = exact[short, None]  # their bands: their own exact key again
        return keys
