"""The Beam layer of prepare on a real runner, with TestPipeline and assert_that."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.prepare_fns import COUNTS, REJECTS, STATS, CleanChunksFn, MergeCountsFn
from nmtpipe.transforms.corpus.raw_corpus import RawChunk
from nmtpipe.transforms.corpus.registry import Piece
from nmtpipe.transforms.formats.batch_transport import (
    Shipped,
    pairs_table,
    receive_table,
    rejects_table,
)
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.clean import CleanConfig
from nmtpipe.transforms.text.split import SplitConfig
from nmtpipe.transforms.vocab.counts import TokenTally
from tests.helpers import IN_MEMORY, MULTI_PROCESS

SRC = ["Hello, world.", "same", "A cat.", "Dogs bark."]
TGT = ["你好，世界。", "same", "一只猫。", "狗叫。"]
KEPT_SRC, KEPT_TGT = (
    ["Hello, world.", "A cat.", "Dogs bark."],
    ["你好,世界。", "一只猫。", "狗叫。"],
)
CONFIG = CleanConfig(split=SplitConfig(carve=(), shards=(("train", 2),)))


def chunks(n: int = 3) -> list[Piece]:
    """The same four lines in `n` chunks of different origins, as a stream's pieces
    (read where they were planned)."""
    return [
        Piece(
            "lines",
            RawChunk(f"c{k}", "train", 1, "\n".join(SRC).encode(), "\n".join(TGT).encode(), (0, 1)),
        )
        for k in range(n)
    ]


def _tables(grouped):
    key, batches = grouped
    table = pairs_table(batches)
    return key, sorted(zip(table["origin"].to_pylist(), table["src"].to_pylist(), strict=True))


def _side_counts(bucket: int, part: tuple[str, Shipped]) -> tuple[str, dict[str, int]]:
    table = receive_table(part[1])
    return part[0], dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True))


@pytest.mark.parametrize("spill", [False, True])
def test_clean_chunks_fn_outputs(tmp_path, spill, monkeypatch):
    # a tally that is full after every chunk: counts leave as they are made
    monkeypatch.setattr(TokenTally, "FLUSH_ROWS", 2)
    with TestPipeline(argv=IN_MEMORY) as p:
        out = (
            p
            | beam.Create(chunks())
            | beam.ParDo(
                CleanChunksFn(CONFIG, ("en", "zh"), 1, 1, str(tmp_path) if spill else None)
            ).with_outputs(REJECTS, COUNTS, STATS, main="pairs")
        )
        pairs = (
            out.pairs
            | beam.GroupByKey()
            | beam.Map(_tables)
            | beam.FlatMapTuple(lambda key, rows: [(key[0], origin, src) for origin, src in rows])
        )
        assert_that(
            pairs,
            equal_to([("train", f"c{k}", s) for k in range(3) for s in SRC if s != "same"]),
            label="pairs",
        )
        rejects = (
            out[REJECTS]
            | beam.FlatMapTuple(
                lambda shard, item: (
                    rejects_table([item]).select(["origin", "line", "reason"]).to_pylist()
                )
            )
            | beam.Map(lambda r: (r["origin"], r["line"], r["reason"]))
        )
        assert_that(rejects, equal_to([(f"c{k}", 2, "copy") for k in range(3)]), label="rejects")
        stats = out[STATS] | beam.Map(lambda s: (s["pairs_read"], s["rejects"]))
        assert_that(stats, equal_to([(4, {"copy": 1})] * 3), label="stats")
        expected = {
            "en": dict(t2t_tokenizer.count_tokens(KEPT_SRC * 3)),
            "zh": dict(t2t_tokenizer.count_tokens(KEPT_TGT * 3)),
        }
        sent = out[COUNTS] | beam.MapTuple(_side_counts)
        counts = sent | beam.CombinePerKey(MergeCountsFn())
        assert_that(counts, equal_to(list(expected.items())), label="counts")
        assert_that(sent | beam.combiners.Count.Globally(), equal_to([6]), label="a tally a chunk")


def test_counts_emitted_per_bundle_add_up_across_worker_processes():
    # Many bundles on worker processes, three buckets: the tallies must add up exactly.
    with TestPipeline(argv=MULTI_PROCESS) as p:
        cleaned = (
            p
            | beam.Create(chunks(40))
            | beam.Reshuffle()
            | beam.ParDo(CleanChunksFn(CONFIG, ("en", "zh"), 3, 1, None)).with_outputs(
                COUNTS, main="pairs"
            )
        )
        counts = cleaned[COUNTS] | beam.MapTuple(_side_counts) | beam.CombinePerKey(MergeCountsFn())
        assert_that(
            counts,
            equal_to(
                [
                    ("en", dict(t2t_tokenizer.count_tokens(KEPT_SRC * 40))),
                    ("zh", dict(t2t_tokenizer.count_tokens(KEPT_TGT * 40))),
                ]
            ),
        )
