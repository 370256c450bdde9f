"""A weighted sample of token counts that fits a character budget: what T2T's vocabulary
builder holds on the driver, whatever the corpus.

T2T's builder (`kinds/subword_build.py`) holds every character of every distinct token
(and a few rows per character), so its memory grows with the distinct tokens, and real
text has nearly one distinct Chinese token per clause. The counts are therefore
streamed once, in bounded memory, through a priority sample (Duffield, Lund and Thorup,
"Priority sampling for estimation of arbitrary subset sums", 2007): each count row gets
the priority `count / u`, with `u` in (0, 1) drawn from a stable hash of the token, and
the rows of highest priority are kept until their characters fill the budget. A kept
row's count becomes `max(count, tau)`, `tau` being the priority of the first row left
out: every substring's count is then an unbiased estimate of its true count, frequent
tokens are always kept whole, and the long tail is represented by a uniform share of
it, scaled up. Where every row fits, nothing changes and T2T's result is exact.

Rows of several prepared datasets (a refresh's parts) are sampled as separate items
(`salt` differs per dataset) and summed per token afterwards, which keeps every estimate
unbiased without summing the datasets' counts first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.text.string_hash import crc32, mix64

_SCHEMA = pa.schema(
    [("token", pa.string()), ("count", pa.int64()), ("priority", pa.float64()),
     ("characters", pa.int64())]
)  # fmt: skip
_ORDER = [("priority", "descending"), ("token", "ascending")]
# Rows waiting to be sorted into the kept ones: a cut sorts the kept rows (already in
# order, which Arrow's sort finds cheap) with these.
CUT_ROWS = 1 << 18


def characters(tokens: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The characters of each token as T2T's builder holds it: escaped, one longer for
    its closing `_` (a backslash or underscore, escaped as two, is counted as one)."""
    return pc.utf8_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64) + 1


def uniform(tokens: pa.Array, salt: int) -> np.ndarray:
    """A number in (0, 1) for each token, the same in every process: CRC-32 of the token
    and `salt`, mixed by splitmix64's finaliser (CRC alone is linear in the bytes)."""
    h = mix64((crc32(tokens).astype(np.uint64) << np.uint64(32)) | np.uint64(salt & 0xFFFFFFFF))
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53


@dataclass
class CountSample:
    """The sampled tokens with their (estimated) counts, and what was left out."""

    tokens: pa.Array
    counts: np.ndarray
    rows_read: int = 0
    mass_read: int = 0
    rows_kept: int = 0
    mass_kept: int = 0  # the kept rows' true counts
    characters_read: int = 0
    characters_kept: int = 0
    threshold: float = 0.0  # tau; 0 when every row was kept

    @property
    def pruned(self) -> bool:
        return self.rows_kept < self.rows_read

    def as_dict(self) -> dict[str, int]:
        """The sample as a dict (for small data and tests)."""
        return dict(zip(self.tokens.to_pylist(), self.counts.tolist(), strict=True))

    def report(self) -> dict[str, Any]:
        """What the manifest records of the sample."""
        out: dict[str, Any] = {
            "distinct_tokens": self.rows_read,
            "distinct_tokens_used": len(self.tokens),
            "characters": self.characters_read,
        }
        if self.pruned:
            out["pruned"] = {
                "rows_kept": self.rows_kept,
                "token_mass_kept": round(self.mass_kept / max(self.mass_read, 1), 6),
                "characters_kept": self.characters_kept,
                "threshold": round(self.threshold, 6),
            }
        return out


class PrioritySample:
    """Count rows streamed in (`add`), the highest-priority ones kept within `budget`
    characters (0: all of them) in memory bounded by the budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept = _SCHEMA.empty_table()
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._floor = 0.0  # priority of the first row left out so far
        self._rows = self._mass = self._characters = 0

    def add(self, batch: pa.RecordBatch | pa.Table, salt: int = 0) -> None:
        tokens = batch["token"]
        counts = batch["count"].to_numpy(zero_copy_only=False).astype(np.int64)
        sizes = characters(tokens)
        self._rows += len(counts)
        self._mass += int(counts.sum())
        self._characters += int(sizes.sum())
        priority = counts / uniform(tokens, salt)
        keep = priority >= self._floor
        table = pa.table([tokens, counts, priority, sizes], schema=_SCHEMA)
        if not keep.all():
            table = table.filter(pa.array(keep))
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self.budget and self._pending_rows > CUT_ROWS:
            self._cut()

    def _cut(self) -> None:
        """Keep the rows of highest priority whose characters fit the budget."""
        table = pa.concat_tables([self._kept, *self._pending]).sort_by(_ORDER)
        self._pending, self._pending_rows = [], 0
        fits = np.cumsum(table["characters"].to_numpy()) <= self.budget
        kept = int(np.count_nonzero(fits))  # a prefix: the sums only grow
        if kept < table.num_rows:
            self._floor = max(self._floor, float(table["priority"][kept].as_py()))
        self._kept = table.slice(0, kept).combine_chunks()

    def result(self) -> CountSample:
        """The kept tokens, each with `max(count, tau)`, summed per token."""
        if self.budget:
            self._cut()
        kept = pa.concat_tables([self._kept, *self._pending]).combine_chunks()
        threshold = self._floor if kept.num_rows < self._rows else 0.0
        counts = kept["count"].to_numpy() if kept.num_rows else np.zeros(0, np.int64)
        weights = np.maximum(counts, round(threshold))
        summed = pa.table({"token": kept["token"], "count": weights}).group_by("token")
        summed = summed.aggregate([("count", "sum")])
        return CountSample(
            tokens=summed["token"].combine_chunks(),
            counts=summed["count_sum"].to_numpy(),
            rows_read=self._rows,
            mass_read=self._mass,
            rows_kept=kept.num_rows,
            mass_kept=int(counts.sum()),
            characters_read=self._characters,
            characters_kept=int(pc.sum(kept["characters"]).as_py() or 0),
            threshold=threshold,
        )


def sample_counts(datasets: Iterable[Iterable[pa.RecordBatch]], budget: int) -> CountSample:
    """The priority sample of the count rows of one or several datasets (each an
    iterable of count batches), within `budget` characters (0: every row)."""
    sample = PrioritySample(budget)
    for salt, batches in enumerate(datasets):
        for batch in batches:
            sample.add(batch, salt)
    result = sample.result()
    # Arrow's allocator keeps the pages the sorts freed; the build that follows
    # allocates through numpy's, and would add its peak to them.
    pa.default_memory_pool().release_unused()
    return result
