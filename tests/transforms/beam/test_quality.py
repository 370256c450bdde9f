"""The pair scorers' Beam parts on a real runner: what they learn in passes of a
combiner (inline or spilled, any bundling: the same tables), and the near-duplicate
groups, keyed by the shard of each pair that goes."""

from __future__ import annotations

import pickle
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.quality import (
    FindNearDuplicates,
    LearnScores,
    MatchSampleScores,
    SampleLimit,
    learned_by_scorer,
)
from nmtpipe.transforms.formats.batch_transport import inline, receive_table
from nmtpipe.transforms.quality.base import Pairs, sample_limit
from nmtpipe.transforms.quality.judge import score_bins
from nmtpipe.transforms.quality.kinds.length import LengthConfig, LengthScorer
from nmtpipe.transforms.quality.kinds.lexical import LexicalConfig, LexicalScorer
from nmtpipe.transforms.quality.kinds.neardup import NearDupConfig, NearDupScorer
from nmtpipe.transforms.quality.matching import quantile_maps
from nmtpipe.transforms.text.records import pair_batch
from nmtpipe.transforms.text.split import ID_RANGE
from tests.helpers import IN_MEMORY, example_lines

LANGS = ("en", "zh")
EN, ZH = example_lines("tatoeba-cmn", "en")[:600], example_lines("tatoeba-cmn", "zh")[:600]


def batches(
    src: list[str],
    tgt: list[str],
    split: str = "train",
    per: int = 100,
    ids: np.ndarray | None = None,
) -> list:
    ids = np.arange(len(src)) if ids is None else ids
    out = []
    for k in range(0, len(src), per):
        n = len(src[k : k + per])
        batch = pair_batch(
            "c.{en,zh}",
            pa.array(ids[k : k + n], pa.int64()),
            src[k : k + per],
            tgt[k : k + per],
            pa.array(np.arange(k + 1, k + n + 1), pa.int64()),
        )
        out.append(((split, 0), inline(batch)))
    return out


def learned(
    items: list, spill_dir: str | None, out: Path, wanted: int = 0, trusted: list = ()
) -> dict:
    """What LearnScores learned from a sample of about `wanted` of the pairs `items`
    (0: all) and the `trusted` ones, as the shard writers read it (pickled to `out`)."""
    scorers = [LexicalScorer(LexicalConfig(lexical_bits=14)), LengthScorer(LengthConfig())]
    with TestPipeline(argv=IN_MEMORY) as p:
        pairs = p | beam.Create(items)
        limit = pairs | SampleLimit(wanted)
        inputs = (pairs, p | "Trusted" >> beam.Create(trusted)) if trusted else (pairs,)
        passes = inputs | LearnScores(scorers, LANGS, spill_dir, limit)
        sides = [beam.pvalue.AsSingleton(found) for found in passes]
        _ = (
            p
            | "One" >> beam.Create([None])
            | beam.Map(
                lambda _, *found: out.write_bytes(pickle.dumps(learned_by_scorer(found, scorers))),
                *sides,
            )
        )
    return pickle.loads(out.read_bytes())


def test_passes_learn_the_same_tables_inline_or_spilled_in_any_order(tmp_path):
    items = batches(EN, ZH)
    inline_ = learned(items, None, tmp_path / "inline.pickle")
    spilled = learned(items[::-1], str(tmp_path), tmp_path / "spilled.pickle")
    assert inline_.keys() == spilled.keys() == {"lexical", "length"}
    assert len(inline_["lexical"]) == len(inline_["length"]) == 2
    for k in range(2):
        assert np.array_equal(inline_["length"][k], spilled["length"][k])
    first, second = inline_["lexical"]
    assert np.array_equal(first.units[1].counts, spilled["lexical"][0].units[1].counts)
    assert np.array_equal(second[0].links.counts, spilled["lexical"][1][0].links.counts)
    assert int(first.units[0].counts.sum()) > 0


def test_a_sample_is_learned_from_the_pairs_below_the_id_limit_and_trusted_pairs_whole(tmp_path):
    ids = np.random.default_rng(5).integers(0, ID_RANGE, len(EN))
    below = ids < sample_limit(len(EN), 200)
    picked = [batches(*(list(np.array(side)[below]) for side in (EN, ZH)), ids=ids[below])]
    trusted = batches(EN[:150], ZH[:150], ids=ids[:150])
    sampled = learned(batches(EN, ZH, ids=ids), None, tmp_path / "s.pickle", 200, trusted)
    alone = learned(picked[0] + trusted, None, tmp_path / "a.pickle")
    assert 150 < below.sum() < 250
    assert sampled["lexical"][0].pairs == below.sum() + 150
    for k in range(2):
        assert np.array_equal(sampled["length"][k], alone["length"][k])
    assert np.array_equal(
        sampled["lexical"][1][1].links.counts, alone["lexical"][1][1].links.counts
    )


def matched(items: list, wanted: int, out: Path) -> tuple[dict, dict]:
    """The maps MatchSampleScores finds for a sample of about `wanted` of `items`, and
    what the scorers learned (pickled to `out`)."""
    scorers = [LexicalScorer(LexicalConfig(lexical_bits=14)), LengthScorer(LengthConfig())]
    with TestPipeline(argv=IN_MEMORY) as p:
        pairs = p | beam.Create(items)
        limit = pairs | SampleLimit(wanted)
        passes = (pairs,) | LearnScores(scorers, LANGS, None, limit)
        maps = pairs | MatchSampleScores(scorers, LANGS, wanted, limit, passes)
        sides = [beam.pvalue.AsSingleton(found) for found in (maps, *passes)]
        _ = (
            p
            | "One" >> beam.Create([None])
            | beam.Map(
                lambda _, maps, *found: out.write_bytes(
                    pickle.dumps((maps, learned_by_scorer(found, scorers)))
                ),
                *sides,
            )
        )
    return pickle.loads(out.read_bytes())


def test_scores_outside_the_sample_are_matched_by_both_groups_histograms(tmp_path):
    ids = np.random.default_rng(5).integers(0, ID_RANGE, len(EN))
    maps, found = matched(batches(EN, ZH, ids=ids), 300, tmp_path / "m.pickle")
    inside = ids < sample_limit(len(EN), 300)
    scores = LexicalScorer(LexicalConfig(lexical_bits=14)).score(
        found["lexical"], Pairs(EN, ZH, LANGS, inside)
    )["lexical"]
    hists = {
        g: {"lexical": score_bins(scores[r])} for g, r in (("inside", inside), ("outside", ~inside))
    }
    expected = quantile_maps(hists)["lexical"]
    assert maps.keys() == {"lexical"}  # length scores both groups alike: nothing to match
    assert np.array_equal(maps["lexical"].outside, expected.outside)
    assert np.array_equal(maps["lexical"].inside, expected.inside)
    assert np.nanmedian(scores[inside]) > np.nanmedian(scores[~inside])  # what it corrects
    every_pair, _ = matched(batches(EN, ZH, ids=ids), 1000, tmp_path / "all.pickle")
    assert every_pair == {}  # all learned from: nothing to match


@pytest.mark.parametrize("spilled", [False, True], ids=["inline", "spilled"])
def test_near_duplicates_go_to_the_shard_of_the_pair_that_goes(spilled, tmp_path):
    """A valid pair outranks its train copies; a train pair repeated but for case and
    punctuation keeps its first id's copy; keys and findings travel inline or as files."""
    src = ["Where is the station?", "WHERE IS THE STATION", "I like tea.", "i like tea"]
    tgt = ["车站在哪里？", "车站在哪里", "我喜欢茶。", "我喜欢茶"]
    items = [
        (
            ("valid", 0),
            inline(
                pair_batch(
                    "v.{en,zh}",
                    pa.array([7], pa.int64()),
                    src[:1],
                    tgt[:1],
                    pa.array([1], pa.int64()),
                )
            ),
        ),
        (
            ("train", 2),
            inline(
                pair_batch(
                    "t.{en,zh}",
                    pa.array([3, 1, 2], pa.int64()),
                    src[1:],
                    tgt[1:],
                    pa.array([1, 2, 3], pa.int64()),
                )
            ),
        ),
    ]
    finder = NearDupScorer(NearDupConfig(neardup_bands=8))
    with TestPipeline(argv=IN_MEMORY) as p:
        near = (
            p
            | beam.Create(items)
            | FindNearDuplicates([finder], LANGS, 3, str(tmp_path) if spilled else None)
            | beam.MapTuple(lambda key, item: (key, receive_table(item).to_pylist()))
            | beam.GroupByKey()  # a pair found in several bands: once in the shard writer
            | beam.MapTuple(
                lambda key, found: (
                    key,
                    sorted({tuple(r.values()) for rows in found for r in rows}),
                )
            )
        )
        assert_that(
            near,
            equal_to(
                [
                    (
                        ("train", 2),
                        [
                            ("t.{en,zh}", 1, "like the pair at v.{en,zh}:1"),
                            ("t.{en,zh}", 3, "like the pair at t.{en,zh}:2"),
                        ],
                    )
                ]
            ),
        )
    assert bool(list(tmp_path.glob("*.arrow"))) == spilled


@pytest.mark.parametrize("spilled", [False, True], ids=["inline", "spilled"])
def test_one_pair_read_first_in_two_chunks_keeps_both_chunks_keys(spilled, tmp_path):
    """A pair repeated across inputs leads two batches of one shard: each batch's keys
    travel on their own (spilled, in files named after where their first pair was read)."""
    items = [
        (("train", 2), inline(pair_batch(origin, pa.array(ids, pa.int64()), src, tgt,
                                         pa.array(range(1, len(ids) + 1), pa.int64()))))
        for origin, ids, src, tgt in (
            ("a.{en,zh}", [1], ["I like tea."], ["我喜欢茶。"]),
            ("b.{en,zh}", [1, 3], ["I like tea.", "i like tea"], ["我喜欢茶。", "我喜欢茶"]),
        )
    ]  # fmt: skip
    finder = NearDupScorer(NearDupConfig())
    with TestPipeline(argv=IN_MEMORY) as p:
        near = (
            p
            | beam.Create(items)
            | FindNearDuplicates([finder], LANGS, 1, str(tmp_path) if spilled else None)
            | beam.MapTuple(lambda key, item: receive_table(item).to_pylist())
            | beam.FlatMap(lambda rows: [tuple(r.values()) for r in rows])
        )
        assert_that(near, equal_to([("b.{en,zh}", 2, "like the pair at a.{en,zh}:1")]))
