"""Deterministic ids, splits and shards from a keyed hash of the normalised pair.

Everything here is a pure function of the pair's text and the seed, never of the order
in which a runner happens to process it: the same pair lands in the same split and
shard on every run, every runner and every refresh.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np

SplitKey = Literal["pair", "src", "tgt"]
SPLITS = ("train", "valid", "test")
ID_RANGE = 1 << 63  # pair ids are uniform over [0, ID_RANGE) (`Placer`)


@dataclass(frozen=True)
class SplitConfig:
    """How pairs are split and sharded.

    `carve` lists the splits taken from the training input by hash (those without input
    of their own), with their fractions; `shards` gives each split's shard count.
    `key="src"` keeps every translation of one source sentence in the same split, so
    that a sentence with several translations cannot leak from train into test.
    """

    valid_fraction: float = 0.01
    test_fraction: float = 0.01
    carve: tuple[str, ...] = ("valid", "test")
    key: SplitKey = "pair"
    seed: int = 0
    shards: tuple[tuple[str, int], ...] = field(default=(("train", 1), ("valid", 1), ("test", 1)))

    def __post_init__(self) -> None:
        carved = self.carved_fraction("valid") + self.carved_fraction("test")
        if not 0 <= self.valid_fraction < 1 or not 0 <= self.test_fraction < 1 or carved >= 1:
            raise ValueError("valid and test fractions must be in [0, 1) and sum to less than 1")
        if self.key not in ("pair", "src", "tgt"):
            raise ValueError(f"unknown split key {self.key!r}")
        if any(n < 1 for _, n in self.shards):
            raise ValueError("every split needs at least one shard")
        if not set(self.carve) <= set(dict(self.shards)):
            raise ValueError("a carved split needs a shard count")

    def carved_fraction(self, split: str) -> float:
        if split not in self.carve:
            return 0.0
        return self.valid_fraction if split == "valid" else self.test_fraction

    def num_shards(self, split: str) -> int:
        return dict(self.shards)[split]

    def splits(self) -> tuple[str, ...]:
        """The splits this configuration produces."""
        return tuple(s for s in SPLITS if s in dict(self.shards))


class Placements(NamedTuple):
    """Ids, splits (indices into SPLITS) and shards of a batch of pairs."""

    ids: np.ndarray
    splits: np.ndarray
    shards: np.ndarray


class Placer:
    """Places batches of normalised pairs; build once per worker.

    A pair's 128-bit keyed BLAKE2b digest gives its id (bits 0-63), its split draw
    (bits 64-95) and its shard (bits 96-127), so the three are independent.
    """

    def __init__(self, config: SplitConfig) -> None:
        self.config = config
        # Keyed BLAKE2b spends one compression on the key block: done once here, and
        # each text's hash starts from a copy (a third less time per pair).
        self._keyed = hashlib.blake2b(digest_size=16, key=f"nmtpipe:{config.seed}".encode())
        self._shards = np.array([dict(config.shards).get(s, 1) for s in SPLITS], dtype=np.uint64)
        self._test = config.carved_fraction("test")
        self._valid = config.carved_fraction("valid")

    def _words(self, texts: Iterable[str]) -> np.ndarray:
        """The digests of `texts` as four big-endian uint32 words each."""
        start = self._keyed.copy

        def digest(text: str) -> bytes:
            h = start()
            h.update(text.encode())
            return h.digest()

        digests = b"".join(map(digest, texts))
        return np.frombuffer(digests, dtype=">u4").reshape(-1, 4).astype(np.uint64)

    def place(self, src: list[str], tgt: list[str], role: str) -> Placements:
        """Placements of pairs read from input of split `role` ("train" input is carved)."""
        words = self._words(map("\x00".join, zip(src, tgt, strict=True)))
        ids = ((words[:, 0] << np.uint64(32)) | words[:, 1]) >> np.uint64(1)
        splits = np.full(len(src), SPLITS.index(role), dtype=np.int64)
        if role == "train" and self.config.carve:
            if self.config.key != "pair":
                words = self._words(src if self.config.key == "src" else tgt)
            draw = words[:, 2] / 2.0**32
            splits[draw < self._test + self._valid] = SPLITS.index("valid")
            splits[draw < self._test] = SPLITS.index("test")
        shards = words[:, 3] % self._shards[splits]
        return Placements(ids.astype(np.int64), splits, shards.astype(np.int64))
