"""The model score's formula, its verdicts and its files, without torch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.quality import judge, thresholds
from nmtpipe.transforms.quality.models import dcce
from nmtpipe.transforms.storage import fsio


def test_the_paper_s_formula_on_known_values():
    # Equal cross-entropies: only their mean counts; a disagreement counts in full.
    assert dcce.dcce(np.array([0.0]), np.array([0.0])) == pytest.approx([1.0])
    assert dcce.dcce(np.array([2.0]), np.array([2.0])) == pytest.approx([np.exp(-2.0)])
    assert dcce.dcce(np.array([1.0]), np.array([3.0])) == pytest.approx([np.exp(-4.0)])
    assert dcce.dcce(np.array([3.0]), np.array([1.0])) == dcce.dcce(
        np.array([1.0]), np.array([3.0])
    )
    # Lower is worse both ways: higher cross-entropies, or further apart.
    assert dcce.dcce(np.array([2.0]), np.array([2.5])) < dcce.dcce(np.array([2.0]), np.array([2.0]))


def test_pairs_below_the_threshold_are_rejected_and_unscored_ones_kept():
    scorer = dcce.DcceScorer(dcce.DcceThreshold(0.1, "scores", {}, {}))
    values = np.array([0.5, 0.05, np.nan, 0.1, 0.0999], dtype=np.float32)
    (verdicts,) = scorer.verdicts({"dcce": values}, 0)
    assert verdicts.reason == "dcce" and verdicts.rows.tolist() == [1, 4]
    assert verdicts.details[0] == "the models disagree or doubt: dcce 0.0500 < 0.1"


def test_a_score_file_of_other_pairs_is_refused(tmp_path):
    ids = pa.array([3, 5, 9], pa.int64())
    h = pa.array([1.0, 2.0, 3.0], pa.float32())
    table = pa.Table.from_arrays([ids, h, h, h], schema=dcce.SCHEMA)
    fsio.write_parquet(str(tmp_path / "train-00000-of-00001.parquet"), table)
    found = dcce.scores_for(str(tmp_path), "train-00000-of-00001.parquet", np.array([3, 5, 9]))
    assert found.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(InputError, match=r"not those of train-00000-of-00001\.parquet"):
        dcce.scores_for(str(tmp_path), "train-00000-of-00001.parquet", np.array([3, 9, 5]))
    with pytest.raises(InputError, match="no DCCE scores for train-00001"):
        dcce.scores_for(str(tmp_path), "train-00001-of-00002.parquet", np.array([3]))


def test_no_threshold_is_proposed_for_it():
    hist = judge.score_bins(np.array([0.001, 0.002, 0.3, 0.5], dtype=np.float32))
    assert thresholds.propose("dcce", hist) is None
    assert thresholds.threshold_of({"dcce": {"dcce_min": 0.02}}, "dcce") == 0.02
