"""IBM Model 1 in tables of a fixed size: how much of one side of a pair the other side
explains, learned from the corpus itself.

Model 1 (Brown et al. 1993) says each target unit is a translation of one source unit
or of nothing (NULL), with probability t(f|e). Its expected counts are sums over pairs,
so each of its EM iterations is one pass of a combiner: the first pass (from a uniform
start) counts co-occurrences, each weighted 1/(source units + 1); the second spreads
each target unit over the source units by the first pass's t. Units seen in one pair
only have nothing to learn from and are left out of the second pass.

A pair is scored by its own units under the second pass's t, with its own contribution
to the counts taken back out first (leave-one-out): otherwise each misaligned pair's
rare words would "explain" one another, having only ever met there. Each target unit
gets log(sum_e t(f|e) / (|e| + 1)) - log p(f): how much likelier the source makes it
than its frequency alone; the pair's score is the mean over its target units that occur
elsewhere in the corpus.

Units are counted once per line (a bag of distinct units), so a pair's own counts are
one per (e, f) and can be taken back exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nmtpipe.transforms.quality.tables import SCALE, CountTable, pair_keys
from nmtpipe.transforms.quality.units import Ragged

NULL = np.uint64(0)  # the source's "nothing", position 0 of every source line
FLOOR = 1e-6  # the least probability a target unit gets from its source


def with_null(units: Ragged) -> Ragged:
    """Each line's units after a NULL."""
    lengths = units.lengths + 1
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.full(int(starts[-1]), NULL, dtype=np.uint64)
    mask = np.ones(values.size, dtype=bool)
    mask[starts[:-1]] = False
    values[mask] = units.values
    return Ragged(values, starts)


@dataclass(frozen=True)
class Links:
    """Every (source unit or NULL, target unit) of each pair, grouped by target unit:
    entry k links source position `src_at[k]` (into the NULL-led source units) and
    target unit `tgt_at[k]`; each target unit's entries start at `groups[tgt_at]`."""

    e: np.ndarray
    f: np.ndarray
    src_at: np.ndarray
    tgt_at: np.ndarray
    groups: np.ndarray  # first entry of each target unit's group
    width: np.ndarray  # source units + 1, per entry

    @classmethod
    def of(cls, src: Ragged, tgt: Ragged) -> Links:
        sources = with_null(src)
        per_token = sources.lengths[tgt.owner]  # each target unit links to |e| + 1
        groups = np.concatenate([[0], np.cumsum(per_token)]).astype(np.int64)
        total = int(groups[-1])
        tgt_at = np.repeat(np.arange(tgt.values.size), per_token)
        within = np.arange(total) - groups[:-1][tgt_at]
        src_at = sources.starts[:-1][tgt.owner][tgt_at] + within
        return cls(
            sources.values[src_at],
            tgt.values[tgt_at],
            src_at,
            tgt_at,
            groups[:-1],
            per_token[tgt_at],
        )

    @property
    def keys(self) -> np.ndarray:
        return pair_keys(self.e, self.f)

    def group_sums(self, values: np.ndarray) -> np.ndarray:
        """Per target unit, the sum of its entries' `values`."""
        if values.size == 0:
            return np.zeros(self.groups.size)
        return np.add.reduceat(values, self.groups)


@dataclass
class Direction:
    """Expected counts of one direction (target explained by source): c(e, f) and
    c(e) = sum over f."""

    links: CountTable
    totals: CountTable

    @classmethod
    def empty(cls, link_bits: int, unit_bits: int) -> Direction:
        return cls(CountTable.empty(link_bits), CountTable.empty(unit_bits))

    def t(self, links: Links) -> np.ndarray:
        """t(f|e) of each link."""
        totals = self.totals.get(links.e).astype(np.float64)
        found = self.links.get(links.keys).astype(np.float64)
        return np.divide(found, totals, out=np.zeros_like(found), where=totals > 0)

    def add(self, links: Links, amounts: np.ndarray, mask: np.ndarray | None = None) -> None:
        keys, e = links.keys, links.e
        if mask is not None:
            keys, e, amounts = keys[mask], e[mask], amounts[mask]
        self.links.add(keys, amounts)
        self.totals.add(e, amounts)

    def merge(self, other: Direction) -> Direction:
        self.links.merge(other.links)
        self.totals.merge(other.totals)
        return self


def uniform_amounts(links: Links) -> np.ndarray:
    """The first pass's expected counts: 1/(|e| + 1) of each link, fixed-point."""
    return SCALE // links.width


def posterior_amounts(first: Direction, links: Links) -> np.ndarray:
    """The second pass's expected counts: each target unit spread over its source units
    (NULL included) in proportion to the first pass's t(f|e), fixed-point."""
    t = first.t(links)
    sums = links.group_sums(t)[links.tgt_at]
    share = np.divide(t, sums, out=1.0 / links.width, where=sums > 0)
    return np.rint(share * SCALE).astype(np.int64)


def explained(
    first: Direction,
    second: Direction,
    frequency: CountTable,
    tokens: int,
    links: Links,
    counted: np.ndarray,
    tgt: Ragged,
) -> np.ndarray:
    """Per pair, the mean over its target units seen in another line of
    log(sum_e t(f|e) / (|e| + 1)) - log p(f), its own counts taken out of `second` (it
    added the `counted` links there) and out of `frequency` (each line's target units,
    `tokens` in all); NaN where no target unit was seen elsewhere. `links` are the
    pairs' links (`Links.of(src, tgt)`)."""
    own = np.where(counted, posterior_amounts(first, links), 0)
    # what the pair added to c(e) at each of its source positions, over its target units
    own_totals = np.bincount(links.src_at, weights=own)
    found = second.links.get(links.keys) - own
    totals = second.totals.get(links.e) - own_totals[links.src_at]
    t = np.divide(found, totals, out=np.zeros(found.size), where=totals > 0)
    t = np.maximum(t, 0.0)  # a cell that other keys share never gives less than nothing
    s = links.group_sums(t / links.width)
    pairs = len(tgt.starts) - 1
    others = frequency.get(tgt.values) - 1
    rest = tokens - tgt.lengths[tgt.owner]
    use = (others > 0) & (rest > 0)
    background = np.divide(others, rest, out=np.ones(others.size), where=use)
    llr = np.log(np.maximum(s, FLOOR)) - np.log(background)
    owner = tgt.owner[use]
    n = np.bincount(owner, minlength=pairs)
    total = np.bincount(owner, weights=llr[use], minlength=pairs)
    return np.divide(total, n, out=np.full(pairs, np.nan), where=n > 0)
