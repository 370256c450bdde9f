"""Model 1's compiled passes against Model 1 written out plainly, pair by pair, in
dictionaries: the same tables to the bit, the same scores."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from nmtpipe.transforms.quality import model1
from nmtpipe.transforms.quality.base import Pairs
from nmtpipe.transforms.quality.tables import SCALE, CountTable, pair_keys
from nmtpipe.transforms.quality.units import Ragged
from tests.transforms.quality.test_lexical import corpus

BITS = 20  # few keys in many cells: a collision is unlikely, and would show as a mismatch


def lines(side: Ragged) -> list[list[int]]:
    return [
        side.values[a:b].tolist() for a, b in zip(side.starts[:-1], side.starts[1:], strict=True)
    ]


def reference(
    src: list[list[int]], tgt: list[list[int]], learned: list[bool]
) -> tuple[dict, dict, list[float]]:
    """Model 1's two passes over the pairs `learned` from and the scores of all (a learned
    pair's leave-one-out), one pair and one link at a time: (pass 1's counts, pass 2's
    counts, the scores); counts as {"links": {(e, f): n}, "totals": {e: n}}."""
    null = 0
    all_src, all_tgt = src, tgt
    src, tgt = (
        [s for s, k in zip(src, learned, strict=True) if k],
        [t for t, k in zip(tgt, learned, strict=True) if k],
    )
    seen_e, seen_f = Counter(u for s in src for u in s), Counter(u for t in tgt for u in t)
    first: dict = {"links": defaultdict(int), "totals": defaultdict(int)}
    for s, t in zip(src, tgt, strict=True):
        amount = SCALE // (len(s) + 1)
        for f in t:
            for e in [null, *s]:
                first["links"][e, f] += amount
                first["totals"][e] += amount

    def shares(s: list[int], f: int) -> dict[int, int]:
        """What pass 2 adds for f, by source unit (eligible ones only)."""
        sources = [null, *s]
        t = [
            first["links"][e, f] / first["totals"][e] if first["totals"][e] else 0.0
            for e in sources
        ]
        total = sum(t)
        out = {}
        for e, te in zip(sources, t, strict=True):
            if e == null or seen_e[e] >= 2:
                out[e] = int(np.rint((te / total if total else 1 / len(sources)) * SCALE))
        return out

    second: dict = {"links": defaultdict(int), "totals": defaultdict(int)}
    for s, t in zip(src, tgt, strict=True):
        for f in t:
            if seen_f[f] >= 2:
                for e, amount in shares(s, f).items():
                    second["links"][e, f] += amount
                    second["totals"][e] += amount
    tokens = sum(len(t) for t in tgt)
    scores = []
    for s, t, mine in zip(all_src, all_tgt, learned, strict=True):
        own = {f: shares(s, f) if mine and seen_f[f] >= 2 else {} for f in t}
        kept = {e: second["totals"][e] - sum(o.get(e, 0) for o in own.values()) for e in [null, *s]}
        llrs = []
        for f in [f for f in own if seen_f[f] - mine >= model1.EVIDENCE]:
            found = [second["links"][e, f] - own[f].get(e, 0) for e in [null, *s]]
            p = sum(
                n / kept[e] for n, e in zip(found, [null, *s], strict=True) if kept[e] > 0 and n > 0
            )
            rest = tokens - mine * len(t)
            llrs.append(
                math.log(max(p / (len(s) + 1), model1.FLOOR)) - math.log((seen_f[f] - mine) / rest)
            )
        scores.append(sum(llrs) / len(llrs) if llrs else math.nan)
    return first, second, scores


def as_tables(counts: dict) -> tuple[CountTable, CountTable]:
    """Dictionaries of counts in the tables' cells."""
    links, totals = CountTable.empty(BITS), CountTable.empty(BITS - 2)
    if counts["links"]:
        keys = np.array(list(counts["links"]), dtype=np.uint64)
        links.add(pair_keys(keys[:, 0], keys[:, 1]), np.array(list(counts["links"].values())))
        totals.add(
            np.array(list(counts["totals"]), dtype=np.uint64),
            np.array(list(counts["totals"].values())),
        )
    return links, totals


def test_one_key_lands_in_the_cell_the_tables_give_it():
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 2**63, 1000, dtype=np.uint64) for _ in range(2))
    table = CountTable.empty(17)
    keys = pair_keys(a, b)
    assert [model1.pair_left(x) ^ y for x, y in zip(a, b, strict=True)] == keys.tolist()
    assert [model1.cell(k, table.shift) for k in keys] == table.cells(keys).tolist()


@pytest.mark.parametrize("share", [1.0, 0.6], ids=["all learned", "a sample learned"])
def test_the_compiled_passes_are_model_1_written_out(share):
    src_lines, tgt_lines = corpus(200, seed=3)
    tgt_lines = tgt_lines[1:20] + tgt_lines[:1] + tgt_lines[20:]  # 20 that do not translate
    learned = np.random.default_rng(4).random(len(src_lines)) < share
    src, tgt = Pairs(src_lines, tgt_lines, ("en", "zh")).units
    taught = Pairs(
        [s for s, k in zip(src_lines, learned, strict=True) if k],
        [t for t, k in zip(tgt_lines, learned, strict=True) if k],
        ("en", "zh"),
    ).units
    seen = (CountTable.empty(BITS - 2), CountTable.empty(BITS - 2))
    seen[0].add(taught[0].values)
    seen[1].add(taught[1].values)
    first = model1.Direction.empty(BITS, BITS - 2)
    model1.count_uniform(first, *taught)
    second = model1.Direction.empty(BITS, BITS - 2)
    model1.count_posterior(second, first, seen, *taught)
    scores = model1.explained(first, second, seen, int(taught[1].values.size), src, tgt, learned)

    want_first, want_second, want_scores = reference(lines(src), lines(tgt), learned.tolist())
    for got, want in ((first, want_first), (second, want_second)):
        links, totals = as_tables(want)
        assert np.array_equal(got.links.counts, links.counts)
        assert np.array_equal(got.totals.counts, totals.counts)
    assert np.allclose(scores, want_scores, equal_nan=True)
    assert np.isfinite(scores[~learned]).sum() >= 20 * (share < 1)  # pairs scored, not learned
    assert np.isfinite(scores).sum() > 150
