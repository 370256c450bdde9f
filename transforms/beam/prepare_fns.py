"""The Beam layer of `prepare`: thin DoFns and CombineFns around the pure functions.

Elements are chunks and batches, never single lines. DoFns keep only their constructor
arguments when pickled and build heavy objects (the normaliser) in `setup`, once per
worker. Each file a writer commits is reported as a manifest entry so that the driver can
write the manifest without reading any data back.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from nmtpipe.transforms.beam.quality import learned_by_scorer, near_duplicates
from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import RawChunk
from nmtpipe.transforms.corpus.registry import Piece
from nmtpipe.transforms.formats import batch_transport, pair_shards
from nmtpipe.transforms.formats.shard_names import counts_path, pairs_path, rejects_path
from nmtpipe.transforms.quality.base import LEARN_ALL
from nmtpipe.transforms.quality.judge import ChunkJudge, ShardJudge
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.manifest import FileEntry, file_entry
from nmtpipe.transforms.storage.read_meter import Meter, ReadCount
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.clean import ChunkCleaner, CleanConfig, PairConfirmer
from nmtpipe.transforms.text.langid.identifier import LangIdConfig
from nmtpipe.transforms.text.overlap import Protected
from nmtpipe.transforms.text.records import Reject, by_key, reject_batch, reject_shards
from nmtpipe.transforms.vocab import counts as counts_lib
from nmtpipe.transforms.vocab.counts import JOINED

NAMESPACE = "nmtpipe.prepare"
REJECTS, COUNTS, CHARS, STATS, FILES = "rejects", "counts", "chars", "stats", "files"
PROTECTED, PENDING = "protected", "pending"
# Pending pairs are judged this many shards' worth to a key: a worker that gets a key
# loads lingua's accurate models (2.1 CPU seconds for the Latin candidates) for the few
# pending pairs of about 256 MB of input, not for each shard's.
SHARDS_PER_JUDGE = 8


def rejects_partial(rejects: pa.Table) -> dict[str, Any]:
    """Statistics of rejects (REJECTS_SCHEMA): by reason, and by reason per input."""
    reasons: Counter[str] = Counter()
    per_input: dict[str, dict[str, int]] = defaultdict(dict)
    if rejects.num_rows:
        grouped = rejects.group_by(["origin", "reason"]).aggregate([("line", "count")])
        columns = (grouped[name].to_pylist() for name in ("origin", "reason", "line_count"))
        for origin, reason, n in zip(*columns, strict=True):
            per_input[origin][reason] = n
            reasons[reason] += n
    return {
        "rejects": dict(reasons),
        "inputs": {origin: {"rejects": c} for origin, c in per_input.items()},
    }


def reject_table(rejects: list[Reject]) -> pa.Table:
    return pa.Table.from_batches([reject_batch(rejects)])


def ship_rejects(
    rejects: pa.Table, num_shards: int, spill_url: str | None
) -> Iterator[TaggedOutput]:
    """Rejects as batches keyed by reject shard, shipped like pair batches."""
    batches = {
        shard: batch_transport.one_batch(part)
        for shard, part in reject_shards(rejects, num_shards).items()
    }
    for item in batch_transport.ship(batches, spill_url):
        yield TaggedOutput(REJECTS, item)


Measured = tuple[CorpusInput, Any, Any]  # an input, a part of it, what the part holds


def survey_input(inp: CorpusInput) -> Iterator[tuple[str, tuple[CorpusInput, Any]]]:
    """An input's parts to measure (`Reader.survey`), keyed by the input (its first
    file: no two inputs share one); one empty part where it has none, so that it is
    planned all the same."""
    for part in registry.survey(inp) or [None]:
        yield inp.src, (inp, part)


def measure_part(keyed: tuple[str, tuple[CorpusInput, Any]]) -> tuple[str, Measured]:
    """What one part of an input holds that its plan needs (`Reader.measure`)."""
    key, (inp, part) = keyed
    return key, (inp, part, None if part is None else registry.measure(inp, part))


class PlanChunksFn(beam.DoFn):
    """An input's measured parts → its pieces (`corpus/registry.py`): references the
    cleaning workers read (lines of plain files, row groups, TMX fragments), or records
    read here where the input cannot be split."""

    def __init__(self, chunk_lines: int) -> None:
        self.chunk_lines = chunk_lines
        self.chunks = Metrics.counter(NAMESPACE, "chunks")

    def process(self, grouped: tuple[str, Iterable[Measured]]) -> Iterator[Any]:
        found = list(grouped[1])
        measured = [(part, what) for _, part, what in found if part is not None]
        for chunk in registry.plan(found[0][0], self.chunk_lines, measured):
            self.chunks.inc()
            yield chunk


def ship_counts(
    tables: Mapping[str, pa.Table], buckets: int, spill_url: str | None
) -> Iterator[TaggedOutput]:
    """Count tables of each side split into buckets, ready for the shuffle: keyed by
    bucket, the side beside each, inline or all spilled to one file at `spill_url`;
    tagged COUNTS."""
    keyed = {
        (side, bucket): batch_transport.one_batch(part)
        for side, table in tables.items()
        for bucket, part in counts_lib.into_buckets(table, buckets).items()
    }
    for (side, bucket), item in batch_transport.ship(keyed, spill_url):
        yield TaggedOutput(COUNTS, (bucket, (side, item)))


class BundleCounts:
    """Token counts of a DoFn's chunks, tallied in C++ and sent on (`ship_counts`)
    whenever a side's tally is full, and at the end: a worker holds a bounded tally,
    however many chunks its bundle has (one bundle is half the input on the local
    runner)."""

    def __init__(self, langs: tuple[str, str], buckets: int, spill_dir: str | None) -> None:
        self.langs, self.buckets, self.spill_dir = langs, buckets, spill_dir
        self._tallies = {side: counts_lib.TokenTally() for side in langs}

    def add(self, tokens: tuple[pa.StringArray, pa.StringArray]) -> Iterator[TaggedOutput]:
        """Count `tokens` (one array per side); the tallies, if one is full."""
        for side, found in zip(self.langs, tokens, strict=True):
            self._tallies[side].add(found)
        if any(tally.is_full() for tally in self._tallies.values()):
            yield from self.emit()

    def emit(self) -> Iterator[TaggedOutput]:
        """What the tallies hold, sent on; they start again empty."""
        tables = {side: tally.take() for side, tally in self._tallies.items()}
        yield from ship_counts(
            tables, self.buckets, batch_transport.spill_url(self.spill_dir, uuid.uuid4().hex)
        )


def reject_stats(rejects: pa.Table) -> dict[str, Any]:
    """Rejects as a statistics partial, counted in the job's metrics as well."""
    partial = rejects_partial(rejects)
    for reason, n in partial["rejects"].items():
        Metrics.counter(NAMESPACE, f"rejected_{reason}").inc(n)
    return partial


class CleanChunksFn(beam.DoFn):
    """Chunk → pair batches keyed by (split, shard); rejects, counts, stats, what the
    chunk's valid and test pairs protect (`overlap.py`) and the pairs left for lingua's
    accurate models (`PENDING`: batches with their (split, shard), always inline, keyed
    by their shard's group of `SHARDS_PER_JUDGE`) tagged.

    With a `spill_dir` a chunk's pair batches go to one Arrow file there, its rejects to
    another, and only references travel on; without, the batches travel inline (see
    `transforms/formats/batch_transport.py`).
    """

    def __init__(
        self,
        config: CleanConfig,
        langs: tuple[str, str],
        count_buckets: int,
        reject_shards: int,
        spill_dir: str | None,
        meter: Meter | None = None,
        quality: Any = None,
    ) -> None:
        self.config = config
        self.quality = quality
        self.langs = langs
        self.count_buckets = count_buckets
        self.reject_shards = reject_shards
        self.spill_dir = spill_dir
        self.read_count = ReadCount(meter)
        self.read = Metrics.counter(NAMESPACE, "pairs_read")
        self.rejected = Metrics.counter(NAMESPACE, "pairs_rejected")

    def setup(self) -> None:
        judging = [] if self.quality is None else self.quality.pair_scorers()
        judging = [scorer for scorer in judging if scorer.PASSES == 0]
        judge = ChunkJudge(judging, self.langs) if judging else None
        self._clean = ChunkCleaner(self.config, defer=True, judge=judge)

    def start_bundle(self) -> None:
        self._counts = BundleCounts(self.langs, self.count_buckets, self.spill_dir)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        self.read_count.publish()
        for tagged in self._counts.emit():
            value = WindowedValue(tagged.value, MIN_TIMESTAMP, [GlobalWindow()])
            yield TaggedOutput(tagged.tag, value)

    def process(self, piece: Piece) -> Iterator[Any]:
        for chunk in registry.load(piece):
            yield from self._clean_chunk(chunk)

    def _clean_chunk(self, chunk: RawChunk) -> Iterator[Any]:
        out = self._clean(chunk)
        self.read_count.add(len(chunk.src) + len(chunk.tgt or b""))
        self.read.inc(out.pairs_read)
        self.rejected.inc(len(out.rejects))
        name = f"{chunk.origin}:{chunk.first_line}"
        rejects = reject_table(out.rejects)
        yield from batch_transport.ship(
            out.pairs, batch_transport.spill_url(self.spill_dir, f"pairs {name}")
        )
        yield from ship_rejects(
            rejects,
            self.reject_shards,
            batch_transport.spill_url(self.spill_dir, f"rejects {name}"),
        )
        for key, item in batch_transport.ship(out.pending, None):
            yield TaggedOutput(PENDING, (key[1] // SHARDS_PER_JUDGE, (key, item)))
        yield from self._counts.add(out.train_tokens)
        partial = reject_stats(rejects)
        found = dict(zip(("src", "tgt"), chunk.encodings, strict=True))
        partial["inputs"].setdefault(chunk.origin, {}).update(
            read=out.pairs_read, encoding={side: {name: 1} for side, name in found.items()}
        )
        yield TaggedOutput(
            STATS,
            {
                **partial,
                "pairs_read": out.pairs_read,
                "converted": out.converted,
                "ratio_hist": out.ratio_hist,
            },
        )
        for (split, _), batch in sorted(out.pairs.items()):
            if split != "train":
                yield TaggedOutput(PROTECTED, Protected.of_batch(split, batch))


class ConfirmLanguagesFn(beam.DoFn):
    """(group, [((split, shard), pending batch)]) → the pairs lingua's accurate models
    keep, as pair batches keyed by their (split, shard); their rejects, counts, stats and
    what the kept valid and test pairs protect tagged, as `CleanChunksFn` tags them. The
    models load on first use, only in the workers that get pending pairs."""

    def __init__(
        self, langid: LangIdConfig, langs: tuple[str, str], count_buckets: int, reject_shards: int
    ) -> None:
        self.langid = langid
        self.langs = langs
        self.count_buckets = count_buckets
        self.reject_shards = reject_shards
        self.rejected = Metrics.counter(NAMESPACE, "pairs_rejected")

    def setup(self) -> None:
        self._confirm = PairConfirmer(self.langid)

    def process(
        self, element: tuple[int, Iterable[tuple[tuple[str, int], batch_transport.Shipped]]]
    ) -> Iterator[Any]:
        _, items = element
        by_split: dict[str, list[tuple[int, pa.Table]]] = defaultdict(list)
        for (split, shard), item in items:
            by_split[split].append((shard, batch_transport.receive_table(item)))
        counts = BundleCounts(self.langs, self.count_buckets, None)
        found: list[Reject] = []
        for split, parts in sorted(by_split.items()):
            # Judged in one call per split: a group holds a batch per chunk and shard,
            # of a pair or two each, and each call has a fixed cost.
            batch = batch_transport.one_batch(pa.concat_tables([table for _, table in parts]))
            shards = np.repeat([shard for shard, _ in parts], [t.num_rows for _, t in parts])
            out = self._confirm(split, batch)
            kept = by_key(pa.Table.from_batches([out.pairs]), shards[out.kept])
            for shard, pairs in sorted(kept.items()):
                yield (split, shard), batch_transport.inline(batch_transport.one_batch(pairs))
            if split != "train" and out.pairs.num_rows:
                yield TaggedOutput(PROTECTED, Protected.of_batch(split, out.pairs))
            found += out.rejects
            yield from counts.add(out.train_tokens)
        rejects = reject_table(found)
        self.rejected.inc(rejects.num_rows)
        yield from ship_rejects(rejects, self.reject_shards, None)
        yield from counts.emit()
        yield TaggedOutput(STATS, reject_stats(rejects))


class WritePairShardsFn(beam.DoFn):
    """((split, shard), [batch]) → one Parquet shard; duplicates and pairs overlapping
    a split that outranks this one (the `Protected` side input) become rejects, and in
    the train split their tokens go out as negative counts."""

    def __init__(
        self,
        output: str,
        shard_counts: dict[str, int],
        langs: tuple[str, str],
        count_buckets: int,
        reject_shards: int,
        spill_dir: str | None,
        keep_overlap: bool = False,
        quality: Any = None,
        exempt: frozenset[str] = frozenset(),
        calibrated: bool = False,
    ) -> None:
        self.quality = quality
        self.exempt = exempt
        self.calibrated = calibrated  # the last side input: thresholds the trusted pairs set
        self.keep_overlap = keep_overlap
        self.output = output
        self.shard_counts = shard_counts
        self.langs = langs
        self.count_buckets = count_buckets
        self.reject_shards = reject_shards
        self.spill_dir = spill_dir
        self.kept = Metrics.counter(NAMESPACE, "pairs_kept")

    def process(
        self,
        element: tuple[tuple[str, int], dict[str, Iterable[batch_transport.Shipped]]],
        protected: Protected | batch_transport.SpillRef | None = None,
        *learned,
    ) -> Iterator[Any]:
        (split, shard), found = element
        protected = batch_transport.side_input(protected)
        learned, calibrated = (learned[:-1], learned[-1]) if self.calibrated else (learned, {})
        # With learned scorers, the sample's limit and the maps of scores outside it first.
        limit, matched, *learned = learned or (LEARN_ALL, {})
        url = fsio.join(self.output, pairs_path(split, shard, self.shard_counts[split]))
        result = pair_shards.write_pair_shard(
            url,
            found["pairs"],
            split,
            protected,
            self.keep_overlap,
            self._judge(limit, matched, learned, found.get("near", ()), calibrated),
        )
        rows = result.table.num_rows
        self.kept.inc(rows)
        yield TaggedOutput(
            FILES, file_entry(self.output, result.written, "pairs", rows, split=split)
        )
        yield TaggedOutput(
            STATS,
            {**reject_stats(result.duplicates), "splits": {split: result.stats}, **result.scores},
        )
        spill_url = batch_transport.spill_url(self.spill_dir, f"duplicates {split} {shard}")
        yield from ship_rejects(result.duplicates, self.reject_shards, spill_url)
        if split == "train" and result.duplicates.num_rows:
            texts = {field: result.duplicates[field].cast(pa.string()) for field in ("src", "tgt")}
            taken_back = {
                side: counts_lib.count_table(
                    t2t_tokenizer.token_array(texts[field].to_pylist()), sign=-1
                )
                for side, field in zip(self.langs, ("src", "tgt"), strict=True)
            }
            yield from ship_counts(
                taken_back,
                self.count_buckets,
                batch_transport.spill_url(self.spill_dir, f"counts {split} {shard}"),
            )

    def _judge(
        self,
        limit: int,
        matched: dict[str, Any],
        learned: list[Any],
        near: Iterable[Any],
        calibrated: dict[str, Any],
    ) -> pair_shards.Judge | None:
        """The shard's judge: the learned scorers with what they learned (the passes'
        side inputs) from the pairs with ids below `limit`, the scores of the pairs
        outside it mapped by `matched`, with the thresholds `calibrated` sets, and its
        near-duplicates; None without pair scorers."""
        if self.quality is None or not self.quality.kinds():
            return None
        scorers = [
            scorer.with_thresholds(calibrated.get(scorer.NAME, {}))
            for scorer in self.quality.learned_scorers()
        ]
        judge = ShardJudge(
            scorers, learned_by_scorer(learned, scorers), self.langs, self.exempt, limit, matched
        )
        duplicates = near_duplicates(near)
        return lambda table: judge(table, duplicates)


class WriteRejectsFn(beam.DoFn):
    """(shard, [reject batch]) → one Parquet file of rejects."""

    def __init__(self, output: str, num_shards: int) -> None:
        self.output = output
        self.num_shards = num_shards

    def process(
        self, element: tuple[int, Iterable[batch_transport.Shipped]]
    ) -> Iterator[FileEntry]:
        shard, batches = element
        url = fsio.join(self.output, rejects_path(shard, self.num_shards))
        written, n = pair_shards.write_rejects(url, batches)
        yield file_entry(self.output, written, "rejects", n)


class WriteCountsFn(beam.DoFn):
    """(bucket, [(side, shipped counts)]) → a count file per language and one for both
    joined.

    A side comes with several partial tallies (each worker's, and the duplicates'
    negative counts); they are summed, and tokens left with no count dropped. Only this
    bucket's tokens are held.

    Each file's character counts go out tagged CHARS, to be merged into the alphabet,
    and the token totals tagged STATS.
    """

    def __init__(self, output: str, langs: tuple[str, str], buckets: int) -> None:
        self.output = output
        self.langs = langs
        self.buckets = buckets

    def process(
        self, element: tuple[int, Iterable[tuple[str, batch_transport.Shipped]]]
    ) -> Iterator[Any]:
        bucket, parts = element
        received: dict[str, list[pa.Table]] = defaultdict(list)
        for side, item in parts:
            received[side].append(batch_transport.receive_table(item))
        by_side = {
            side: counts_lib.canonical(counts_lib.sum_counts(received[side])) for side in self.langs
        }
        by_side[JOINED] = counts_lib.joined(*(by_side[side] for side in self.langs))
        chars = {side: counts_lib.char_counts(by_side[side]) for side in self.langs}
        chars[JOINED] = MergeCountsFn().merge_accumulators(chars.values())
        for side, counts in by_side.items():
            url = fsio.join(self.output, counts_path(side, bucket, self.buckets))
            written = counts_lib.write_counts(url, counts)
            yield file_entry(
                self.output, written, "counts", counts.num_rows, side=side, bucket=bucket
            )
            yield TaggedOutput(CHARS, (side, chars[side]))
        for side, field in zip(self.langs, ("src", "tgt"), strict=True):
            tokens = pc.sum(by_side[side]["count"]).as_py() or 0
            yield TaggedOutput(STATS, {"splits": {"train": {field: {"tokens": tokens}}}})


class MergeCountsFn(beam.CombineFn):
    """Sums `{key: count}` partials (the characters of the alphabet: a few thousand
    keys at most); lifted before the shuffle."""

    def create_accumulator(self) -> dict[str, int]:
        return {}

    def add_input(self, acc: dict[str, int], part: Mapping[str, int]) -> dict[str, int]:
        for key, count in part.items():
            acc[key] = acc.get(key, 0) + count
        return acc

    def merge_accumulators(self, accs: Iterable[dict[str, int]]) -> dict[str, int]:
        merged: dict[str, int] = {}
        for acc in accs:
            self.add_input(merged, acc)
        return merged

    def extract_output(self, acc: dict[str, int]) -> dict[str, int]:
        return acc


class MergeProtectedFn(beam.CombineFn):
    """What every valid and test pair protects, merged into one `Protected`. With a
    `spill_dir`, what Beam ships of it (partial merges, the result) goes there as files
    and travels as references (`batch_transport.ship_object`): the runner's own process
    never holds a set that grows with the corpus."""

    def __init__(self, spill_dir: str | None = None) -> None:
        self.spill_dir = spill_dir

    def create_accumulator(self) -> Protected:
        return Protected()

    def add_input(self, acc: Protected, part: Protected) -> Protected:
        return acc.merge(part)

    def merge_accumulators(self, accs: Iterable[Protected | batch_transport.SpillRef]) -> Protected:
        merged = Protected()
        for acc in accs:
            merged.merge(batch_transport.receive_object(acc))
        return merged

    def compact(self, acc: Protected | batch_transport.SpillRef) -> Any:
        """The accumulator as Beam moves it: compacted, shipped once (a shipped one is
        already compact, and is passed on as it is)."""
        if isinstance(acc, batch_transport.SpillRef):
            return acc
        return batch_transport.ship_object(acc.compact(), self.spill_dir)

    extract_output = compact  # the result travels as the partial merges do
