"""IBM Model 1 in tables of a fixed size: how much of one side of a pair the other side
explains, learned from the corpus itself.

Model 1 (Brown et al. 1993) says each target unit is a translation of one source unit
or of nothing (NULL), with probability t(f|e). Its expected counts are sums over pairs,
so each of its EM iterations is one pass of a combiner: the first pass (from a uniform
start) counts co-occurrences, each weighted 1/(source units + 1); the second spreads
each target unit over the source units by the first pass's t. Units seen in one line
only have nothing to learn from and are left out of the second pass.

A pair is scored by its own units under the second pass's t, with its own contribution
to the counts taken back out first (leave-one-out): otherwise each misaligned pair's
rare words would "explain" one another, having only ever met there. Each target unit
gets log(sum_e t(f|e) / (|e| + 1)) - log p(f): how much likelier the source makes it
than its frequency alone; the pair's score is the mean over its target units seen in
at least EVIDENCE other lines.

Units are counted once per line (a bag of distinct units), so a pair's own counts are
one per (e, f) and can be taken back exactly.

Every pass visits each (source unit, target unit) of each pair, a few table lookups
each: compiled loops (numba), which visit them in place. Arrays of every link, as numpy
needs them, cost several times the CPU (benchmarks/RESULTS.md, "Pair scores"). A key's cell
is `tables.py`'s, computed one key at a time (`cell`, `pair_left`): here, beside the
loops, because numba's cache of a function is renewed when its own file changes only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from nmtpipe.transforms.quality.tables import PAIR, SCALE, CountTable
from nmtpipe.transforms.quality.units import Ragged

NULL = np.uint64(0)  # the source's "nothing", before every source line's units
FLOOR = 1e-6  # the least probability a target unit gets from its source
# The other lines a target unit must be seen in to count in a pair's score: t(f|e) of a
# unit seen in a few lines, its own pair's counts taken back, is mostly noise (of 8,000
# clean Tatoeba pairs, --lexical-min 0.3 rejected 5.5% with units from 1 other line
# counted, 4.2% from 6).
EVIDENCE = 6


@dataclass
class Direction:
    """Expected counts of one direction (target explained by source): c(e, f) and
    c(e) = sum over f."""

    links: CountTable
    totals: CountTable

    @classmethod
    def empty(cls, link_bits: int, unit_bits: int) -> Direction:
        return cls(CountTable.empty(link_bits), CountTable.empty(unit_bits))

    def merge(self, other: Direction) -> Direction:
        self.links.merge(other.links)
        self.totals.merge(other.totals)
        return self


# What the compiled loops take: a side's lines as (values, starts), a table as (counts,
# shift): numba passes tuples of arrays, not dataclasses.
Lines = tuple[np.ndarray, np.ndarray]
Table = tuple[np.ndarray, int]


def _lines(side: Ragged) -> Lines:
    return side.values, side.starts


def _table(table: CountTable) -> Table:
    return table.counts, table.shift


def count_uniform(into: Direction, src: Ragged, tgt: Ragged) -> None:
    """The first pass: each (e, f) of each pair (NULL among the e) counted 1/(|e| + 1),
    fixed-point."""
    _uniform(_lines(src), _lines(tgt), _table(into.links), _table(into.totals))


def count_posterior(
    into: Direction, first: Direction, seen: tuple[CountTable, CountTable], src: Ragged, tgt: Ragged
) -> None:
    """The second pass: each target unit spread over its source units (NULL included) in
    proportion to the first pass's t(f|e), fixed-point; only units `seen` (per side: how
    many lines hold each) in another line too."""
    _posterior(_lines(src), _lines(tgt), *_tables(first, seen, into))


def explained(
    first: Direction,
    second: Direction,
    seen: tuple[CountTable, CountTable],
    tokens: int,
    src: Ragged,
    tgt: Ragged,
    learned: np.ndarray,
) -> np.ndarray:
    """Per pair, the mean over its target units seen in EVIDENCE other lines of
    log(sum_e t(f|e) / (|e| + 1)) - log p(f), by `second`'s t with the pair's own counts
    taken back (what `count_posterior` added for it) and p(f) from the target side's
    line counts (`seen[1]`, `tokens` in all) without the pair's; NaN where no target
    unit was seen that often. A pair not `learned` from added nothing: none taken back."""
    out = np.empty(len(src.starts) - 1)
    tables = _tables(first, seen, second)
    _explained(_lines(src), _lines(tgt), *tables, tokens, learned, out)
    return out


def _tables(
    first: Direction, seen: tuple[CountTable, CountTable], second: Direction
) -> tuple[Table, ...]:
    """What the second pass and the scores read and write. A link's cell is computed once
    for both passes' tables, which must be of one size."""
    if first.links.shift != second.links.shift:
        raise ValueError("both passes' link tables must have the same size")
    return tuple(_table(t) for t in (first.links, first.totals, *seen, second.links, second.totals))


@njit(cache=True)
def _mix(h: np.uint64) -> np.uint64:
    """string_hash.mix64 of one key."""
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@njit(cache=True)
def pair_left(a: np.uint64) -> np.uint64:
    """What `tables.pair_keys` makes of a before b comes in: the key of (a, b) is this ^
    b, so a loop over many b for one a computes it once."""
    return _mix(a * PAIR)


@njit(cache=True)
def cell(key: np.uint64, shift: int) -> int:
    """`CountTable.cells` of one key, in a table of that `shift`."""
    return np.int64(_mix(key) >> np.uint64(shift))


# The loops. Each pair's source units are looked up once (`_sources`), each link's cell
# computed once and used in both passes' tables; what is left per link is its hash and
# a read or two.


@njit(cache=True)
def _uniform(src: Lines, tgt: Lines, links: Table, totals: Table) -> None:
    (src_v, src_s), (tgt_v, tgt_s) = src, tgt
    left = np.empty(_widest(src_s), np.uint64)
    for i in range(src_s.size - 1):
        a, b = src_s[i], src_s[i + 1]
        width = b - a + 1
        amount = SCALE // width
        per_source = amount * (tgt_s[i + 1] - tgt_s[i])
        for p in range(width):
            e = NULL if p == 0 else src_v[a + p - 1]
            left[p] = pair_left(e)
            totals[0][cell(e, totals[1])] += per_source
        for j in range(tgt_s[i], tgt_s[i + 1]):
            for p in range(width):
                links[0][cell(left[p] ^ tgt_v[j], links[1])] += amount


@njit(cache=True)
def _seen(table: Table, unit: np.uint64) -> bool:
    """Whether a unit was seen in two lines or more: what Model 1 learns from."""
    return table[0][cell(unit, table[1])] >= 2


@njit(cache=True)
def _sources(src_v: np.ndarray, a: int, b: int, totals: Table, seen: Table, buffers: tuple) -> None:
    """Into `buffers`, per position p of NULL + src_v[a:b]: its unit e[p], the left half
    of its links' keys left[p], its count c[p] in `totals`, and ok[p]: whether it counts
    in the second pass (NULL, or seen in another line)."""
    e, left, c, ok = buffers[:4]
    for p in range(b - a + 1):
        e[p] = NULL if p == 0 else src_v[a + p - 1]
        left[p] = pair_left(e[p])
        c[p] = totals[0][cell(e[p], totals[1])]
        ok[p] = p == 0 or _seen(seen, e[p])


@njit(cache=True)
def _shares(
    buffers: tuple, width: int, f: np.uint64, links: Table, cells: np.ndarray, out: np.ndarray
) -> None:
    """Target unit f spread over the pair's source positions (`_sources`' buffers) by
    the first pass's t(f|e) (evenly where t says nothing), fixed-point, 0 where not ok:
    into out[:width], and each link's cell into cells[:width]."""
    _, left, c, ok = buffers[:4]
    total = 0.0
    for p in range(width):
        cells[p] = cell(left[p] ^ f, links[1])
        out[p] = links[0][cells[p]] / c[p] if c[p] > 0 else 0.0
        total += out[p]
    for p in range(width):
        share = out[p] / total if total > 0 else 1.0 / width
        out[p] = np.rint(share * SCALE) if ok[p] else 0.0


@njit(cache=True)
def _widest(starts: np.ndarray) -> int:
    """The most units of a line, and 1 (NULL, or room for nothing)."""
    return (np.max(np.diff(starts)) if starts.size > 1 else 0) + 1


@njit(cache=True)
def _buffers(src_s: np.ndarray, tgt_s: np.ndarray) -> tuple:
    """Scratch space: `_sources`' four for the widest source (NULL included), and cells
    and amounts for it times the longest target."""
    widest, longest = _widest(src_s), _widest(tgt_s)
    return (
        np.empty(widest, np.uint64),
        np.empty(widest, np.uint64),
        np.empty(widest),
        np.empty(widest, np.bool_),
        np.empty(widest * longest, np.int64),
        np.empty(widest * longest),
    )


@njit(cache=True)
def _pair_shares(
    src_v: np.ndarray,
    a: int,
    b: int,
    tgt_v: np.ndarray,
    c: int,
    d: int,
    first_links: Table,
    first_totals: Table,
    seen_e: Table,
    seen_f: Table,
    buffers: tuple,
    added: np.ndarray,
    learned: bool,
) -> int:
    """What the second pass counts of the pair (src_v[a:b], tgt_v[c:d]), the one routine
    of the pass and of the scores that take it back: each target unit's shares (0 for a
    unit seen in one line) and its links' cells at (j - c) * width in the buffers'
    amounts and cells, their sum per source position into added[:width]; the width
    (source units + 1). A pair not `learned` from counted nothing: every link's cell,
    and 0 to take back."""
    width = b - a + 1
    _sources(src_v, a, b, first_totals, seen_e, buffers)
    left, cells, amounts = buffers[1], buffers[4], buffers[5]
    added[:width] = 0.0
    for j in range(c, d):
        at = (j - c) * width
        if learned and _seen(seen_f, tgt_v[j]):
            _shares(buffers, width, tgt_v[j], first_links, cells[at:], amounts[at:])
            added[:width] += amounts[at : at + width]
            continue
        if not learned:
            for p in range(width):
                cells[at + p] = cell(left[p] ^ tgt_v[j], first_links[1])
        amounts[at : at + width] = 0.0
    return width


@njit(cache=True)
def _posterior(
    src: Lines,
    tgt: Lines,
    first_links: Table,
    first_totals: Table,
    seen_e: Table,
    seen_f: Table,
    links: Table,
    totals: Table,
) -> None:
    (src_v, src_s), (tgt_v, tgt_s) = src, tgt
    buffers = _buffers(src_s, tgt_s)
    e, cells, amounts = buffers[0], buffers[4], buffers[5]
    added = np.empty(e.size)
    for i in range(src_s.size - 1):
        c, d = tgt_s[i], tgt_s[i + 1]
        width = _pair_shares(src_v, src_s[i], src_s[i + 1], tgt_v, c, d, first_links,
                             first_totals, seen_e, seen_f, buffers, added, True)  # fmt: skip
        for k in range((d - c) * width):
            if amounts[k] != 0.0:  # unseen units' rows hold no cells
                links[0][cells[k]] += np.int64(amounts[k])
        for p in range(width):
            totals[0][cell(e[p], totals[1])] += np.int64(added[p])


@njit(cache=True)
def _explained(
    src: Lines,
    tgt: Lines,
    first_links: Table,
    first_totals: Table,
    seen_e: Table,
    seen_f: Table,
    links: Table,
    totals: Table,
    tokens: int,
    learned: np.ndarray,
    out: np.ndarray,
) -> None:
    (src_v, src_s), (tgt_v, tgt_s) = src, tgt
    buffers = _buffers(src_s, tgt_s)
    e, cells, own = buffers[0], buffers[4], buffers[5]
    kept = np.empty(e.size)  # each source unit's second-pass total, the pair's taken back
    for i in range(src_s.size - 1):
        first, last = tgt_s[i], tgt_s[i + 1]
        width = _pair_shares(src_v, src_s[i], src_s[i + 1], tgt_v, first, last, first_links,
                             first_totals, seen_e, seen_f, buffers, kept, learned[i])  # fmt: skip
        for p in range(width):
            kept[p] = totals[0][cell(e[p], totals[1])] - kept[p]
        mine = 1 if learned[i] else 0  # what the pair added to the line counts
        rest = tokens - mine * (last - first)
        n, total = 0, 0.0
        for j in range(first, last):
            others = seen_f[0][cell(tgt_v[j], seen_f[1])] - mine
            if others < EVIDENCE or rest <= 0:
                continue
            at = (j - first) * width
            s = 0.0
            for p in range(width):
                found = links[0][cells[at + p]] - own[at + p]
                if kept[p] > 0 and found > 0:
                    s += found / kept[p]
            total += np.log(max(s / width, FLOOR)) - np.log(others / rest)
            n += 1
        out[i] = total / n if n > 0 else np.nan
