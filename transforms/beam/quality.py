"""The pair scorers in Beam (`transforms/quality/`): what they learn from the pairs, in
passes of a combiner, and the near-duplicate groups, found in a shuffle of each pair's
keys; the shard writers score and judge with both (`prepare_fns.WritePairShardsFn`).

    pair batches ─LearnScores(1)─▶ learned 1 ─LearnScores(2)─▶ learned 2 ... (side inputs)
         └──────MatchSampleScores(learned)─▶ maps of scores outside the sample (side input)
         └──────FindNearDuplicates─▶ near-duplicates by (split, shard)
    trusted pair batches ─CalibrateThresholds(learned)─▶ each score's threshold (side input)

A pass gathers a bundle's batches into one accumulator per scorer and sends it on when
the bundle ends (Beam's own combiner lifting would hold one per bundle too); the partial
accumulators merge by addition. Tables of a fixed size: what travels does not grow with
the corpus, and with a spill directory it travels as files (`batch_transport`). Keys
travel as Arrow tables, partitioned by key into as many groups as the plan gives, so
that a group's memory is bounded as a shard's is; with a spill directory they too travel
as files, for a local runner holds what it shuffles in its own process (at 4M pairs the
keys inline held 1.9 GB more there).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from nmtpipe.transforms.formats import batch_transport
from nmtpipe.transforms.quality import thresholds
from nmtpipe.transforms.quality.base import (
    LEARN_ALL,
    DuplicateKeys,
    LearnedScorer,
    Pairs,
    PairScorer,
    sample_limit,
)
from nmtpipe.transforms.quality.judge import score_bins
from nmtpipe.transforms.quality.kinds.neardup import RANK
from nmtpipe.transforms.quality.matching import calibration_ids, quantile_maps
from nmtpipe.transforms.text.records import locations
from nmtpipe.transforms.text.split import SPLITS
from nmtpipe.transforms.text.stats import merge_into

KEYS_SCHEMA = pa.schema(
    [
        ("key", pa.uint64()),
        ("rank", pa.int8()),
        ("id", pa.int64()),
        ("origin", pa.string()),
        ("line", pa.int64()),
        ("split", pa.int8()),
        ("shard", pa.int64()),
    ]
)
TRUSTED = "trusted"  # the key of trusted pair batches where they join the corpus's
NEAR_SCHEMA = pa.schema([("origin", pa.string()), ("line", pa.int64()), ("detail", pa.string())])


def _pairs(table: pa.Table, langs: tuple[str, str], learned: np.ndarray | None = None) -> Pairs:
    return Pairs(table["src"].to_pylist(), table["tgt"].to_pylist(), langs, learned)


class SampleLimit(beam.PTransform):
    """Pair batches → a singleton: the id limit below which about `wanted` of them lie,
    the sample the learned scorers learn from (`quality/base.py`; 0: all)."""

    def __init__(self, wanted: int) -> None:
        super().__init__()
        self.wanted = wanted

    def expand(self, pairs: beam.PCollection) -> beam.PCollection:
        if not self.wanted:
            return pairs.pipeline | "LearnFromAll" >> beam.Create([LEARN_ALL])
        return (
            pairs
            | "CountPairs" >> beam.MapTuple(lambda _, item: _rows(item))
            | "SumPairs" >> beam.CombineGlobally(sum)
            | "IdLimit" >> beam.Map(sample_limit, self.wanted)
        )


def _rows(item: batch_transport.Shipped) -> int:
    return batch_transport.receive_table(item).num_rows


class LearnFn(beam.DoFn):
    """Pair batches → one accumulator per scorer for pass `pass_` (1-based) of every
    scorer that has that many, per bundle, from the pairs with ids below `limit` (a side
    input) and every trusted pair (keyed TRUSTED); the earlier passes' results are side
    inputs."""

    def __init__(
        self, scorers: list[PairScorer], pass_: int, langs: tuple[str, str], spill_dir: str | None
    ) -> None:
        self.scorers, self.pass_, self.langs, self.spill_dir = scorers, pass_, langs, spill_dir

    def start_bundle(self) -> None:
        self._acc: dict[str, Any] = {}

    def process(self, element: tuple[Any, batch_transport.Shipped], limit: int, *learned) -> None:
        key, item = element
        table = batch_transport.receive_table(item)
        if key != TRUSTED and limit < LEARN_ALL:
            table = table.filter(pc.less(table["id"], limit))
        pairs = _pairs(table, self.langs)
        before = [batch_transport.side_input(found) for found in learned]
        for scorer in self.scorers:
            if scorer.NAME not in self._acc:
                self._acc[scorer.NAME] = scorer.start(self.pass_)
            earlier = [passes[scorer.NAME] for passes in before]
            scorer.gather(self.pass_, earlier, self._acc[scorer.NAME], pairs)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self._acc:
            shipped = batch_transport.ship_object(self._acc, self.spill_dir)
            yield WindowedValue(shipped, MIN_TIMESTAMP, [GlobalWindow()])


class MergeLearnedFn(beam.CombineFn):
    """Merges the accumulators of one pass by scorer; a scorer no bundle saw starts
    empty. With a `spill_dir`, what Beam moves of it travels as files."""

    def __init__(self, scorers: list[PairScorer], pass_: int, spill_dir: str | None) -> None:
        self.scorers, self.pass_, self.spill_dir = scorers, pass_, spill_dir

    def create_accumulator(self) -> dict[str, Any]:
        return {}

    def add_input(self, acc: dict[str, Any], part: Any) -> dict[str, Any]:
        return self.merge_accumulators([acc, part])

    def merge_accumulators(self, accs: Iterable[Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for acc in accs:
            for name, value in batch_transport.receive_object(acc).items():
                scorer = next(s for s in self.scorers if name == s.NAME)
                merged[name] = scorer.merge(merged[name], value) if name in merged else value
        return merged

    def compact(self, acc: Any) -> Any:
        if isinstance(acc, batch_transport.SpillRef):
            return acc
        return batch_transport.ship_object(acc, self.spill_dir)

    def extract_output(self, acc: Any) -> Any:
        found = dict(batch_transport.receive_object(acc))
        for scorer in self.scorers:
            if scorer.NAME not in found:
                found[scorer.NAME] = scorer.start(self.pass_)
        return batch_transport.ship_object(found, self.spill_dir)


class LearnScores(beam.PTransform):
    """(Pair batches[, trusted pair batches]) → what the scorers learned, one singleton
    PCollection per pass: from the pairs whose ids lie below `limit` (a singleton,
    `SampleLimit`), and from every trusted pair."""

    def __init__(
        self,
        scorers: list[PairScorer],
        langs: tuple[str, str],
        spill_dir: str | None,
        limit: beam.PCollection,
    ) -> None:
        super().__init__()
        self.scorers, self.langs, self.spill_dir, self.limit = scorers, langs, spill_dir, limit

    def expand(self, inputs: tuple[beam.PCollection, ...]) -> list[beam.PCollection]:
        pairs, *trusted = inputs
        learn_from = pairs
        if trusted:
            marked = trusted[0] | "MarkTrusted" >> beam.MapTuple(lambda _, item: (TRUSTED, item))
            learn_from = (pairs, marked) | "WithTrusted" >> beam.Flatten()
        learned: list[beam.PCollection] = []
        for pass_ in range(1, max((s.PASSES for s in self.scorers), default=0) + 1):
            scorers = [s for s in self.scorers if pass_ <= s.PASSES]
            sides = [beam.pvalue.AsSingleton(p) for p in (self.limit, *learned)]
            learned.append(
                learn_from
                | f"Pass{pass_}"
                >> beam.ParDo(LearnFn(scorers, pass_, self.langs, self.spill_dir), *sides)
                | f"Merge{pass_}"
                >> beam.CombineGlobally(MergeLearnedFn(scorers, pass_, self.spill_dir))
            )
        return learned


class ScoreTrustedFn(beam.DoFn):
    """Trusted pair batches → each learned score's histogram over them (`judge.py`'s
    bins), given what the scorers learned (the passes' side inputs)."""

    def __init__(self, scorers: list[LearnedScorer], langs: tuple[str, str]) -> None:
        self.scorers, self.langs = scorers, langs

    def process(self, element: tuple[Any, batch_transport.Shipped], *learned) -> Iterator[Any]:
        pairs = _pairs(batch_transport.receive_table(element[1]), self.langs)
        found = learned_by_scorer(learned, self.scorers)
        yield {
            column: score_bins(values)
            for scorer in self.scorers
            for column, values in scorer.score(found[scorer.NAME], pairs).items()
        }


def _merged(partials: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return functools.reduce(merge_into, partials, {})


class CalibrateThresholds(beam.PTransform):
    """Trusted pair batches → a singleton {scorer: {threshold option: value}}: each
    learned score's threshold where `keep` of the trusted pairs are kept, their scores
    by what the scorers learned (`learned`, the passes' singletons). Trusted pairs are
    translations: the tail of their scores is where a clean corpus's rare words lie,
    which is where the threshold belongs (`quality/thresholds.py`)."""

    def __init__(
        self,
        scorers: list[LearnedScorer],
        langs: tuple[str, str],
        keep: float,
        learned: list[beam.PCollection],
    ) -> None:
        super().__init__()
        self.scorers, self.langs, self.keep, self.learned = scorers, langs, keep, learned

    def expand(self, trusted: beam.PCollection) -> beam.PCollection:
        owners = {s.NAME: s.COLUMNS for s in self.scorers}
        sides = [beam.pvalue.AsSingleton(found) for found in self.learned]
        return (
            trusted
            | "ScoreTrusted" >> beam.ParDo(ScoreTrustedFn(self.scorers, self.langs), *sides)
            | "MergeHistograms" >> beam.CombineGlobally(_merged)
            | "Thresholds" >> beam.Map(thresholds.calibrated, owners, self.keep)
        )


class CalibrationFn(beam.DoFn):
    """Pair batches → histograms of the scores of the pairs in the calibration id ranges
    (`quality/matching.py`), by group ("inside" the sample below the id limit, "outside"
    it), given the limit and what the scorers learned (side inputs)."""

    def __init__(self, scorers: list[LearnedScorer], langs: tuple[str, str], wanted: int) -> None:
        self.scorers, self.langs, self.wanted = scorers, langs, wanted

    def process(
        self, element: tuple[Any, batch_transport.Shipped], limit: int, *learned
    ) -> Iterator[Any]:
        if limit >= LEARN_ALL:  # every pair learned from: nothing to match
            return
        table = batch_transport.receive_table(element[1])
        ids = table["id"].to_numpy()
        picked = np.zeros(ids.size, dtype=bool)
        for ids_of in calibration_ids(limit, self.wanted):
            picked |= (ids >= ids_of.start) & (ids < ids_of.stop)
        if not picked.any():
            return
        inside = ids[picked] < limit
        pairs = _pairs(table.filter(pa.array(picked)), self.langs, inside)
        found = learned_by_scorer(learned, self.scorers)
        scores = {
            column: values
            for scorer in self.scorers
            for column, values in scorer.score(found[scorer.NAME], pairs).items()
        }
        yield {
            group: {column: score_bins(values[rows]) for column, values in scores.items()}
            for group, rows in (("inside", inside), ("outside", ~inside))
        }


class MatchSampleScores(beam.PTransform):
    """Pair batches → a singleton {score column: its map} (`quality/matching.py`): how
    the scores of pairs outside the sample below `limit` (a singleton) map onto those
    inside it, for the scorers that need it (`MATCH_OUTSIDE`), given what they learned
    (`learned`, the passes' singletons); {} where every pair was learned from."""

    def __init__(
        self,
        scorers: list[LearnedScorer],
        langs: tuple[str, str],
        wanted: int,
        limit: beam.PCollection,
        learned: list[beam.PCollection],
    ) -> None:
        super().__init__()
        self.scorers, self.langs, self.wanted = scorers, langs, wanted
        self.limit, self.learned = limit, learned

    def expand(self, pairs: beam.PCollection) -> beam.PCollection:
        scorers = [scorer for scorer in self.scorers if scorer.MATCH_OUTSIDE]
        if not (scorers and self.wanted):
            return pairs.pipeline | "NothingToMatch" >> beam.Create([{}])
        sides = [beam.pvalue.AsSingleton(p) for p in (self.limit, *self.learned)]
        return (
            pairs
            | "ScoreCalibration"
            >> beam.ParDo(CalibrationFn(scorers, self.langs, self.wanted), *sides)
            | "MergeCalibration" >> beam.CombineGlobally(_merged)
            | "QuantileMaps" >> beam.Map(quantile_maps)
        )


def learned_partial(first: Any, scorers: list[LearnedScorer], limit: int) -> dict[str, Any]:
    """What the first pass learned, from the pairs below the id `limit` → a statistics
    partial of how many train pairs each scorer learned from (what its least-pairs
    option is held to), and whether they were a sample."""
    found = batch_transport.side_input(first)
    sampled = {"learned_sample": True} if limit < LEARN_ALL else {}
    return {"learned": {s.NAME: s.learned_pairs([found[s.NAME]]) for s in scorers}, **sampled}


def learned_by_scorer(passes: Iterable[Any], scorers: list[PairScorer]) -> dict[str, list[Any]]:
    """The side inputs of every pass → what each scorer learned, pass by pass."""
    found = [batch_transport.side_input(p) for p in passes]
    return {s.NAME: [found[k][s.NAME] for k in range(s.PASSES)] for s in scorers}


class NearDupKeysFn(beam.DoFn):
    """((split, shard), pair batch) → its pairs' keys (KEYS_SCHEMA), by partition."""

    def __init__(
        self,
        finders: list[DuplicateKeys],
        langs: tuple[str, str],
        partitions: int,
        spill_dir: str | None,
    ) -> None:
        self.finders, self.langs, self.partitions = finders, langs, partitions
        self.spill_dir = spill_dir

    def process(self, element: tuple[tuple[str, int], batch_transport.Shipped]) -> Iterator[Any]:
        (split, shard), item = element
        table = batch_transport.receive_table(item)
        if not table.num_rows:
            return
        pairs = _pairs(table, self.langs)
        keys = np.hstack([finder.keys(pairs) for finder in self.finders])
        n, k = keys.shape
        rows = np.repeat(np.arange(n), k)
        flat = pa.table(
            {
                "key": keys.ravel(),
                "rank": np.full(n * k, RANK[split], dtype=np.int8),
                "id": table["id"].to_numpy()[rows],
                "origin": table["origin"].cast(pa.string()).take(rows),
                "line": table["line"].to_numpy()[rows],
                "split": np.full(n * k, SPLITS.index(split), dtype=np.int8),
                "shard": np.full(n * k, shard, dtype=np.int64),
            },
            schema=KEYS_SCHEMA,
        )
        part = (keys.ravel() % np.uint64(self.partitions)).astype(np.int64)
        batches = {
            p: batch_transport.one_batch(flat.filter(pa.array(part == p)))
            for p in np.unique(part).tolist()
        }
        # Where its first pair was read names the batch (one pair may be read in several
        # chunks, its id with it): a retry overwrites the same file.
        first = f"{table['origin'][0].as_py()}:{table['line'][0].as_py()}"
        name = f"neardup keys {split} {shard} {first}"
        yield from batch_transport.ship(batches, batch_transport.spill_url(self.spill_dir, name))


class FindDuplicatesFn(beam.DoFn):
    """(partition, [keys]) → near-duplicates (NEAR_SCHEMA) by their (split, shard): in
    each group of pairs sharing a key, every pair but those of the best-ranked one (the
    split order, then the smallest id; copies of it are exact duplicates, the shard
    writer's) names the pair it repeats."""

    def __init__(self, spill_dir: str | None) -> None:
        self.spill_dir = spill_dir

    def process(self, element: tuple[int, Iterable[batch_transport.Shipped]]) -> Iterator[Any]:
        partition, items = element
        table = pa.concat_tables([batch_transport.receive_table(i) for i in items])
        order = ["key", "rank", "id", "origin", "line"]
        table = table.sort_by([(c, "ascending") for c in order])
        key = table["key"].to_numpy()
        first = np.ones(key.size, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        keeper = np.maximum.accumulate(np.where(first, np.arange(key.size), 0))
        ids = table["id"].to_numpy()
        near = ids != ids[keeper]
        if not near.any():
            return
        rows, kept = np.flatnonzero(near), keeper[near]
        where = locations(table["origin"].take(kept), table["line"].take(kept))
        found = pa.table(
            {
                "origin": table["origin"].take(rows),
                "line": table["line"].take(rows),
                "detail": pc.binary_join_element_wise("like the pair at ", where, ""),
            },
            schema=NEAR_SCHEMA,
        )
        splits, shards = table["split"].to_numpy()[rows], table["shard"].to_numpy()[rows]
        group = splits.astype(np.int64) * (1 << 40) + shards
        batches = {
            (SPLITS[g >> 40], g & ((1 << 40) - 1)): batch_transport.one_batch(
                found.filter(pa.array(group == g))
            )
            for g in np.unique(group).tolist()
        }
        url = batch_transport.spill_url(self.spill_dir, f"neardup found {partition}")
        yield from batch_transport.ship(batches, url)


class FindNearDuplicates(beam.PTransform):
    """Pair batches keyed by (split, shard) → their near-duplicates keyed the same way."""

    def __init__(
        self,
        finders: list[DuplicateKeys],
        langs: tuple[str, str],
        partitions: int,
        spill_dir: str | None,
    ) -> None:
        super().__init__()
        self.finders, self.langs, self.partitions = finders, langs, partitions
        self.spill_dir = spill_dir

    def expand(self, pairs: beam.PCollection) -> beam.PCollection:
        keys = NearDupKeysFn(self.finders, self.langs, self.partitions, self.spill_dir)
        return (
            pairs
            | "Keys" >> beam.ParDo(keys)
            | "GroupKeys" >> beam.GroupByKey()
            | "FindGroups" >> beam.ParDo(FindDuplicatesFn(self.spill_dir))
        )


def near_duplicates(items: Iterable[batch_transport.Shipped]) -> dict[tuple[str, int], str]:
    """A shard's near-duplicates as the judge takes them: (origin, line) → detail."""
    found: dict[tuple[str, int], str] = {}
    for item in items:
        table = batch_transport.receive_table(item)
        for origin, line, detail in zip(
            *(table[c].to_pylist() for c in NEAR_SCHEMA.names), strict=True
        ):
            found.setdefault((origin, line), detail)
    return found
