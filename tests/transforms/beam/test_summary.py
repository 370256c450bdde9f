"""`WriteSummary` alone on a real runner: files and merged statistics in one file."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.summary import WriteSummary
from nmtpipe.transforms.formats.step_summary import read_summary
from tests.helpers import IN_MEMORY


def test_write_summary_merges_stats_and_sorts_files(tmp_path):
    url = str(tmp_path / "summary.json")
    tagged = [
        ("file", {"path": "b", "rows": 2}),
        ("stats", {"pairs_read": 3, "rejects": {"copy": 1}}),
        ("file", {"path": "a", "rows": 1}),
        ("stats", {"pairs_read": 4, "rejects": {"copy": 2, "empty": 1}}),
    ]
    with TestPipeline(argv=IN_MEMORY) as p:
        assert_that(p | beam.Create(tagged) | WriteSummary(url), equal_to([None]))
    assert read_summary(url) == {
        "files": [{"path": "a", "rows": 1}, {"path": "b", "rows": 2}],
        "stats": {"pairs_read": 7, "rejects": {"copy": 3, "empty": 1}},
    }
