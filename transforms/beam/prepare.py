"""The `prepare` graph (the composites around `prepare_fns.py`): raw corpora → Parquet
shards, token counts, rejects, a summary.

`PrepareCorpus` is the whole graph; its parts are composites of their own, each
testable alone:

    CorpusInputs ─CleanChunks─▶ pair batches ─WritePairShards─▶ shards (+ duplicates)
                         ├────▶ valid/test keys ─ProtectSplits─┘ (side input: overlap)
                         ├────▶ rejects ──────┴─WriteRejectFiles─▶ reject files
                         ├────▶ partial counts ─CountTokens─▶ count files, alphabet
                         ├────▶ statistics ─────────────────▶ WriteSummary
                         └────▶ pending pairs ─ConfirmLanguages─▶ the same five kinds

`ConfirmLanguages` judges the few pairs only lingua's accurate models can judge (about
0.2% of a clean corpus, 0.5% of news-like text), eight shards to a key, after the
cleaning: those models cost 2.1 CPU seconds and 234 MB to load, once in each worker
that gets pending pairs instead of in every cleaning worker.

Shards, buckets and reject files that receive no data are not written here; the
driver fills them in (`pipelines/workflow/prepare.py`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import apache_beam as beam

from nmtpipe.transforms.beam import summary
from nmtpipe.transforms.beam.prepare_fns import (
    CHARS,
    COUNTS,
    FILES,
    PENDING,
    PROTECTED,
    REJECTS,
    STATS,
    CleanChunksFn,
    ConfirmLanguagesFn,
    MergeCountsFn,
    MergeProtectedFn,
    PlanChunksFn,
    WriteCountsFn,
    WritePairShardsFn,
    WriteRejectsFn,
    measure_part,
    survey_input,
)
from nmtpipe.transforms.beam.quality import (
    CalibrateThresholds,
    FindNearDuplicates,
    LearnScores,
    MatchSampleScores,
    SampleLimit,
    learned_partial,
)
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.formats.prepared import write_chars
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.commit import STAGING
from nmtpipe.transforms.storage.read_meter import Meter
from nmtpipe.transforms.text.clean import CleanConfig


@dataclass(frozen=True)
class PrepareSpec:
    """What the prepare graph needs to know (small: it is pickled with the DoFns)."""

    output: str
    inputs: tuple[CorpusInput, ...]
    clean: CleanConfig
    langs: tuple[str, str]
    shard_counts: dict[str, int]
    count_buckets: int
    reject_shards: int
    chunk_lines: int = 20000
    keep_overlap: bool = False
    quality: Any = None  # the pair scorers' config (`quality/registry.py`); None: none
    key_partitions: int = 1  # groups of near-duplicate keys (as many as train shards)
    trusted: tuple[CorpusInput, ...] = ()  # pairs the learned scorers also learn from
    trusted_keep: float = 0.0  # the share of them each learned score's threshold keeps (0: off)

    @property
    def exempt(self) -> frozenset[str]:
        """The origins of the reference sets (valid and test inputs the user gave),
        which the pair scorers score and never reject."""
        return frozenset(i.origin for i in self.inputs if i.role != "train")


class CleanChunks(beam.PTransform):
    """CorpusInputs → their pair batches keyed by (split, shard) (main output `pairs`),
    with the `rejects`, partial token `counts`, `stats`, `protected` keys and `pending`
    pairs of every chunk tagged.

    An input is read in up to three stages (`corpus/base.py`), each spread over the
    workers: its parts measured (a plain file's spans, their line ends counted), the
    measures gathered by input and cut into pieces, and the pieces read and cleaned
    where they land; only the measures and the pieces, never the text of a file that
    can be split, pass through the shuffles."""

    def __init__(
        self, spec: PrepareSpec, spill_dir: str | None, meter: Meter | None = None
    ) -> None:
        super().__init__()
        self.spec, self.spill_dir, self.meter = spec, spill_dir, meter

    def expand(self, inputs: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        s = self.spec
        clean = CleanChunksFn(
            s.clean,
            s.langs,
            s.count_buckets,
            s.reject_shards,
            self.spill_dir,
            self.meter,
            s.quality,
        )
        return (
            inputs
            | "Survey" >> beam.FlatMap(survey_input)
            | "SpreadParts" >> beam.Reshuffle()
            | "Measure" >> beam.Map(measure_part)
            | "GatherParts" >> beam.GroupByKey()
            | "PlanChunks" >> beam.ParDo(PlanChunksFn(s.chunk_lines))
            | "Redistribute" >> beam.Reshuffle()
            | "Clean"
            >> beam.ParDo(clean).with_outputs(
                REJECTS, COUNTS, STATS, PROTECTED, PENDING, main="pairs"
            )
        )


class ConfirmLanguages(beam.PTransform):
    """Pending pair batches with their (split, shard), keyed by the shard's group of
    `SHARDS_PER_JUDGE`, from every chunk → the pairs lingua's accurate models keep, keyed
    by (split, shard) (main output `pairs`), with their `rejects`, `counts`, `stats` and
    `protected` keys tagged as `CleanChunks` tags them. A group's pending pairs are a
    small share of it: a corpus of a few shards is judged by one worker, which alone
    loads the models; a larger one by as many workers as it has groups."""

    def __init__(self, spec: PrepareSpec) -> None:
        super().__init__()
        self.spec = spec

    def expand(self, pending: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        s = self.spec
        confirm = ConfirmLanguagesFn(s.clean.langid, s.langs, s.count_buckets, s.reject_shards)
        return (
            pending
            | "GatherPending" >> beam.GroupByKey()
            | "Confirm"
            >> beam.ParDo(confirm).with_outputs(REJECTS, COUNTS, STATS, PROTECTED, main="pairs")
        )


class ProtectSplits(beam.PTransform):
    """What the valid and test pairs protect, per chunk → one `Protected`, shipped as
    the shard writers' singleton side input: inline, or spilled to a file with only its
    reference in the runner (`MergeProtectedFn`)."""

    def __init__(self, spill_dir: str | None) -> None:
        super().__init__()
        self.spill_dir = spill_dir

    def expand(self, parts: beam.PCollection) -> beam.PCollection:
        return parts | "MergeProtected" >> beam.CombineGlobally(MergeProtectedFn(self.spill_dir))


class WritePairShards(beam.PTransform):
    """(Keyed pair batches, what valid and test protect[, the trusted pairs' batches])
    → one Parquet shard per (split, shard), deduplicated, decontaminated and judged by
    the pair scorers (what they learned, from the pairs and the trusted pairs; their
    near-duplicates); tagged outputs: the shards' manifest entries
    (`files`), their `stats`, the dropped pairs as `rejects` and their tokens as
    negative `counts`."""

    def __init__(self, spec: PrepareSpec, spill_dir: str | None) -> None:
        super().__init__()
        self.spec, self.spill_dir = spec, spill_dir

    def expand(
        self, inputs: tuple[beam.PCollection, beam.PCollection]
    ) -> dict[str, beam.PCollection]:
        pairs, protected, *trusted = inputs
        s = self.spec
        calibrate = bool(trusted) and s.trusted_keep > 0
        writer = WritePairShardsFn(
            s.output,
            s.shard_counts,
            s.langs,
            s.count_buckets,
            s.reject_shards,
            self.spill_dir,
            s.keep_overlap,
            s.quality,
            s.exempt,
            calibrate,
        )
        scorers = [] if s.quality is None else s.quality.pair_scorers()
        # What the scorers learn is tables of many megabytes: they always travel as files,
        # in the output's staging folder where no spill directory is given (every worker
        # reaches it; Flink refuses records larger than its sort buffer).
        tables = self.spill_dir or fsio.join(s.output, STAGING, "learned")
        learners = [scorer for scorer in scorers if scorer.PASSES]
        # With learned scorers, the id limit of the pairs they learn from (the writers'
        # side input before the passes' results) and what they learn.
        limit = [pairs | "SampleLimit" >> SampleLimit(s.quality.learn_pairs)] if learners else []
        learned = (
            (pairs, *trusted) | "LearnScores" >> LearnScores(learners, s.langs, tables, *limit)
            if learners
            else []
        )
        # And how their scores of pairs outside the sample map onto those inside it.
        matched = (
            [
                pairs
                | "MatchSampleScores"
                >> MatchSampleScores(
                    s.quality.learned_scorers(), s.langs, s.quality.learn_pairs, limit[0], learned
                )
            ]
            if learners
            else []
        )
        finders = [] if s.quality is None else s.quality.duplicate_keys()
        if finders:
            near = pairs | "FindNearDuplicates" >> FindNearDuplicates(
                finders, s.langs, s.key_partitions, self.spill_dir
            )
            grouped = {"pairs": pairs, "near": near} | "GroupByShard" >> beam.CoGroupByKey()
        else:
            grouped = (
                pairs
                | "GroupByShard" >> beam.GroupByKey()
                | "AsFound" >> beam.MapTuple(lambda key, batches: (key, {"pairs": batches}))
            )
        calibrated = (
            [
                trusted[0]
                | "CalibrateThresholds"
                >> CalibrateThresholds(
                    s.quality.learned_scorers(), s.langs, s.trusted_keep, learned
                )
            ]
            if calibrate
            else []
        )
        sides = [protected, *limit, *matched, *learned, *calibrated]
        shards = grouped | "WritePairShards" >> beam.ParDo(
            writer, *map(beam.pvalue.AsSingleton, sides)
        ).with_outputs(FILES, STATS, REJECTS, COUNTS)
        said = []
        if learned:  # how many pairs each learned from, once (`nmtpipe rethreshold` reads it)
            said.append(
                learned[0]
                | "SayLearned"
                >> beam.Map(
                    learned_partial, s.quality.learned_scorers(), beam.pvalue.AsSingleton(limit[0])
                )
            )
        if calibrated:  # and the thresholds the trusted pairs set
            said.append(calibrated[0] | "SayCalibrated" >> beam.Map(lambda t: {"calibrated": t}))
        stats = (shards[STATS], *said) | "GatherShardStats" >> beam.Flatten()
        return {
            FILES: shards[FILES],
            STATS: stats,
            REJECTS: shards[REJECTS],
            COUNTS: shards[COUNTS],
        }


class WriteRejectFiles(beam.PTransform):
    """Reject batches keyed by reject shard, from several sources → one Parquet file per
    shard; their manifest entries."""

    def __init__(self, output: str, reject_shards: int) -> None:
        super().__init__()
        self.output, self.reject_shards = output, reject_shards

    def expand(self, sources: tuple[beam.PCollection, ...]) -> beam.PCollection:
        return (
            sources
            | "GatherRejects" >> beam.Flatten()
            | "GroupRejects" >> beam.GroupByKey()
            | "WriteRejects" >> beam.ParDo(WriteRejectsFn(self.output, self.reject_shards))
        )


class CountTokens(beam.PTransform):
    """Partial token counts keyed by bucket, from the chunks and (negative) from the
    duplicates → a count file per language and joined per bucket, and the alphabet;
    their manifest entries (main output) and token totals as `stats`.

    The chunks' counts are already combined in each worker (`BundleCounts`), in bounded
    tallies; Beam's combiner lifting would hold a whole bundle's tokens instead, so
    the partials go through a plain shuffle and each bucket is summed where it is
    written."""

    def __init__(self, output: str, langs: tuple[str, str], buckets: int) -> None:
        super().__init__()
        self.output, self.langs, self.buckets = output, langs, buckets

    def expand(self, partials: tuple[beam.PCollection, beam.PCollection]) -> beam.pvalue.PValue:
        count_files = (
            partials
            | "GatherCounts" >> beam.Flatten()
            | "GroupBuckets" >> beam.GroupByKey()
            | "WriteCounts"
            >> beam.ParDo(WriteCountsFn(self.output, self.langs, self.buckets)).with_outputs(
                CHARS, STATS, main=FILES
            )
        )
        chars_file = (
            count_files[CHARS]
            | "SumChars" >> beam.CombinePerKey(MergeCountsFn())
            | "AllSides" >> beam.combiners.ToList()
            | "WriteChars" >> beam.Map(write_chars, self.output)
        )
        files = (count_files[FILES], chars_file) | "GatherCountFiles" >> beam.Flatten()
        return {FILES: files, STATS: count_files[STATS]}


class PrepareCorpus(beam.PTransform):
    """The whole prepare graph, from the pipeline's start; its only driver-visible
    result is the summary file at `summary_url` (files written and statistics); the raw
    bytes of each chunk cleaned are counted into `meter`, the progress shown."""

    def __init__(
        self,
        spec: PrepareSpec,
        summary_url: str,
        spill_dir: str | None = None,
        meter: Meter | None = None,
    ):
        super().__init__()
        self.spec, self.summary_url, self.spill_dir = spec, summary_url, spill_dir
        self.meter = meter

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        s = self.spec
        cleaned = (
            pbegin
            | "ListInputs" >> beam.Create(s.inputs)
            | "CleanChunks" >> CleanChunks(s, self.spill_dir, self.meter)
        )
        confirmed = cleaned[PENDING] | "ConfirmLanguages" >> ConfirmLanguages(s)

        def gather(tag: str) -> beam.PCollection:
            return (cleaned[tag], confirmed[tag]) | f"Gather_{tag}" >> beam.Flatten()

        protected = gather(PROTECTED) | "ProtectSplits" >> ProtectSplits(self.spill_dir)
        shards = (gather("pairs"), protected, *self.trusted_pairs(pbegin)) | (
            "WritePairShards" >> WritePairShards(s, self.spill_dir)
        )
        reject_files = (gather(REJECTS), shards[REJECTS]) | "WriteRejectFiles" >> WriteRejectFiles(
            s.output, s.reject_shards
        )
        counts = (gather(COUNTS), shards[COUNTS]) | "CountTokens" >> CountTokens(
            s.output, s.langs, s.count_buckets
        )
        files = (shards[FILES], reject_files, counts[FILES])
        stats = (gather(STATS), shards[STATS], counts[STATS])
        return (files, stats) | "Summarize" >> summary.SummarizeParts(self.summary_url)

    def trusted_pairs(self, pbegin: beam.pvalue.PBegin) -> list[beam.PCollection]:
        """The trusted inputs' pairs, cleaned as train pairs are (what the learned scorers
        learn from besides the corpus; nothing else of them is kept): none or one."""
        if not self.spec.trusted:
            return []
        spec = dataclasses.replace(self.spec, inputs=self.spec.trusted, trusted=())
        cleaned = (
            pbegin
            | "ListTrusted" >> beam.Create(spec.inputs)
            | "CleanTrusted" >> CleanChunks(spec, self.spill_dir, None)
        )
        return [cleaned["pairs"]]
