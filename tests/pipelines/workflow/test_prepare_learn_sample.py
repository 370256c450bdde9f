"""`prepare --learn-pairs N`: past N pairs the learned scorers learn from a sample of
about N, picked by pair id, and score every pair; on real runners, the same files on
each, and said where the scores are summed up."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.cli.commands.prepare import report
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig, QualityConfig
from nmtpipe.pipelines.workflow.report import build_report
from nmtpipe.pipelines.workflow.rethreshold import run_rethreshold
from nmtpipe.transforms.quality.base import sample_limit
from tests.helpers import IN_MEMORY, MULTI_PROCESS, example_lines, write_pair

CLEAN, MISALIGNED, SAMPLE = 9000, 60, 6000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """9,000 Tatoeba pairs and 60 pairs of a sentence beside another's translation."""
    en, zh = example_lines("tatoeba-cmn", "en"), example_lines("tatoeba-cmn", "zh")
    clean = list(range(0, 3 * CLEAN, 3))
    wrong = list(range(1, 3 * CLEAN, 3 * CLEAN // MISALIGNED))[:MISALIGNED]
    return write_pair(
        tmp_path_factory.mktemp("sample") / "corpus",
        [en[i] for i in clean + wrong],
        [zh[i] for i in clean] + [zh[i] for i in wrong[1:] + wrong[:1]],
    )


def prepare(corpus, output, beam_args, learn_pairs):
    quality = QualityConfig(learn_pairs=learn_pairs)
    config = PrepareConfig("en", "zh", str(output), trainpref=(str(corpus),), quality=quality)
    return run_prepare(config, list(beam_args))


def test_a_sample_teaches_the_scores_of_every_pair_alike_on_every_runner(corpus, tmp_path):
    outcome = prepare(corpus, tmp_path / "sample", MULTI_PROCESS, SAMPLE)
    learned = outcome.stats["learned"]["lexical"]
    assert SAMPLE * 0.9 < learned < SAMPLE * 1.1 and outcome.stats["learned_sample"]
    assert outcome.manifest["options"]["quality"]["learn_pairs"] == SAMPLE
    assert f"scores learned from {learned:,} pairs, a sample of these" in report(outcome)
    page = build_report(str(tmp_path / "sample"))
    assert f"learned from a sample of about {SAMPLE:,} of this corpus's pairs" in page

    # Every kept pair is scored, the sample's and the others alike.
    paths = outcome.manifest["splits"]["train"]["files"]
    train = pq.read_table([str(tmp_path / "sample" / p) for p in paths])
    limit = sample_limit(outcome.stats["pairs_read"], SAMPLE)
    in_sample = train["id"].to_numpy() < limit
    scores = train["score_lexical"].to_numpy()
    assert 0.5 < in_sample.mean() < 0.8
    for rows in (in_sample, ~in_sample):
        assert np.isfinite(scores[rows]).mean() > 0.9 and np.nanmedian(scores[rows]) > 1
    rejected = [r["line"] for r in pq.read_table(tmp_path / "sample" / "rejects").to_pylist()]
    assert sum(line > CLEAN for line in rejected) >= MISALIGNED / 2  # those that do not translate

    again = prepare(corpus, tmp_path / "again", IN_MEMORY, SAMPLE)
    files = [(f["path"], f["sha256"]) for f in outcome.manifest["files"]]
    assert files == [(f["path"], f["sha256"]) for f in again.manifest["files"]]

    # Other thresholds keep the sample's scores, and say so.
    judged = run_rethreshold(str(tmp_path / "sample"), str(tmp_path / "re"), {}, IN_MEMORY)
    assert judged.stats["learned_sample"] and judged.stats["learned"] == outcome.stats["learned"]

    whole = prepare(corpus, tmp_path / "whole", IN_MEMORY, 0)
    assert whole.stats["learned"]["lexical"] > CLEAN * 0.95 and "learned_sample" not in whole.stats
    assert "scores learned from" not in report(whole)
    assert whole.manifest["fingerprint"] != outcome.manifest["fingerprint"]
