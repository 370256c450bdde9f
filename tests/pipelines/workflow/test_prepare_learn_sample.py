"""`prepare --learn-pairs N`: past N pairs the learned scorers learn from a sample of
about N, picked by pair id, and score every pair on one scale; on real runners, the
same files on each, and said where the scores are summed up."""

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
    matched = outcome.stats["matched"]["lexical"]  # scored outside the sample, all splits
    assert outcome.stats.keys() >= {"learned_sample", "matched"} and matched > 2000
    said = report(outcome)
    assert f"scores learned from {learned:,} pairs, a sample of these" in said
    assert f"the lexical scores of the other {matched:,} matched to the sample's" in said
    page = build_report(str(tmp_path / "sample"))
    assert f"learned from a sample of about {SAMPLE:,} of this corpus's pairs" in page
    assert f"the lexical scores of {matched:,} pairs outside it matched" in page

    # Every kept pair is scored, the sample's and the others alike.
    paths = outcome.manifest["splits"]["train"]["files"]
    train = pq.read_table([str(tmp_path / "sample" / p) for p in paths])
    limit = sample_limit(outcome.stats["pairs_read"], SAMPLE)
    in_sample = train["id"].to_numpy() < limit
    scores = train["score_lexical"].to_numpy()
    assert 0.5 < in_sample.mean() < 0.8
    for rows in (in_sample, ~in_sample):
        assert np.isfinite(scores[rows]).mean() > 0.9 and np.nanmedian(scores[rows]) > 1
    rejects = pq.read_table(tmp_path / "sample" / "rejects").to_pylist()
    assert sum(r["line"] > CLEAN for r in rejects) >= MISALIGNED / 2  # those that do not translate

    # On one scale: the scores outside the sample are matched to those inside it (without
    # that, a 5% quantile of 0.14 outside against 0.46 inside, and 5.7% of the clean pairs
    # below the threshold outside against 3.1% inside).
    lexical = [r for r in rejects if r["reason"] == "lexical"]
    ids = np.concatenate([train["id"].to_numpy(), [r["id"] for r in lexical]])
    judged = np.concatenate([scores, [dict(r["scores"])["lexical"] for r in lexical]])
    clean = np.concatenate([train["line"].to_numpy(), [r["line"] for r in lexical]]) <= CLEAN
    groups = [ids < limit, ids >= limit]
    low = [np.nanquantile(judged[rows], 0.05) for rows in groups]
    below = [np.mean(judged[rows & clean] < 0.25) for rows in groups]
    assert abs(low[0] - low[1]) < 0.1 and abs(below[0] - below[1]) < 0.01

    again = prepare(corpus, tmp_path / "again", IN_MEMORY, SAMPLE)
    files = [(f["path"], f["sha256"]) for f in outcome.manifest["files"]]
    assert files == [(f["path"], f["sha256"]) for f in again.manifest["files"]]

    # Other thresholds keep the sample's scores, and say so.
    judged = run_rethreshold(str(tmp_path / "sample"), str(tmp_path / "re"), {}, IN_MEMORY)
    assert judged.stats["learned_sample"] and judged.stats["learned"] == outcome.stats["learned"]
    assert judged.stats["matched"] == outcome.stats["matched"]

    whole = prepare(corpus, tmp_path / "whole", IN_MEMORY, 0)
    assert whole.stats["learned"]["lexical"] > CLEAN * 0.95 and "learned_sample" not in whole.stats
    assert "scores learned from" not in report(whole) and "matched" not in whole.stats
    assert whole.manifest["fingerprint"] != outcome.manifest["fingerprint"]
