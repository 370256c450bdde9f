"""The encode graph alone on a real runner: every task encoded, one summary."""

from __future__ import annotations

import json

import pyarrow as pa
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.pipelines.beam.encode_graph import EncodeShards
from nmtpipe.transforms.formats.encode_part import EncodeSpec, EncodeTask
from nmtpipe.transforms.storage import fsio, manifest
from tests.helpers import IN_MEMORY, example_lines
from tests.transforms.beam.test_encode_fns import LANGS, t2t_vocabulary


def test_encode_shards_encodes_every_task_and_summarises(tmp_path):
    vocab = t2t_vocabulary(tmp_path)
    en, zh = example_lines("tatoeba-cmn", "en", 500), example_lines("tatoeba-cmn", "zh", 500)
    shard = str(tmp_path / "train-00000-of-00001.parquet")
    table = pa.table({"id": list(range(500)), "src": en, "tgt": zh})
    entry = manifest.file_entry(
        str(tmp_path), fsio.write_parquet(shard, table, row_group_size=200), "pairs", 500
    )
    out = str(tmp_path / "out")
    spec = EncodeSpec(out, vocab.root, vocab.doc, LANGS, ("arrow",), "uint16", "uint16", 100)
    tasks = [
        EncodeTask("train", 0, 2, str(tmp_path), entry, (0, 1), False, "fairseq/train.en-zh"),
        EncodeTask("train", 1, 2, str(tmp_path), entry, (2,), False, "fairseq/train1.en-zh"),
    ]
    summary_url = str(tmp_path / "summary.json")
    with TestPipeline(argv=IN_MEMORY) as p:
        assert_that(p | EncodeShards(spec, tasks, summary_url), equal_to([None]))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(f["path"], f["rows"]) for f in summary["files"]] == [
        ("arrow/train-00000-of-00002.arrow", 400),
        ("arrow/train-00001-of-00002.arrow", 100),
    ]
    assert summary["stats"]["splits"]["train"]["pairs"] == 500
