"""The encode DoFn and graph on a Beam runner: files reported as manifest entries, counts
as stats; every task encoded, one summary."""

from __future__ import annotations

import gzip
import json

import apache_beam as beam
import pyarrow as pa
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.encode import EncodePartFn, EncodeShards
from nmtpipe.transforms.formats.encode_part import EncodeSpec, EncodeTask
from nmtpipe.transforms.formats.fairseq_mmap import MMapDataset
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.vocab.fairseq_dict import dict_text
from nmtpipe.transforms.vocab.kinds.subword import SubwordTextEncoder
from nmtpipe.transforms.vocab.vocabulary import Vocabulary
from tests.helpers import DATA, IN_MEMORY, example_lines

LANGS = {"src": "en", "tgt": "zh"}


def t2t_vocabulary(folder) -> Vocabulary:
    """A joined T2T vocabulary folder as `nmtpipe vocab` lays it out (golden T2T file)."""
    text = gzip.decompress((DATA / "golden" / "t2t-vocab-tatoeba.zh.8192.txt.gz").read_bytes())
    subtokens = SubwordTextEncoder.from_text(text.decode()).subtokens
    files = {"vocab.subwords": text}
    for lang in LANGS.values():
        files[f"dict.{lang}.txt"] = dict_text(subtokens[2:], [1] * (len(subtokens) - 2)).encode()
    root = str(folder)
    written = [fsio.write_bytes(fsio.join(root, name), data) for name, data in files.items()]
    doc = {
        "files": [manifest.file_entry(root, w, "vocab", 0) for w in written],
        "model": "t2t",
        "fingerprint": "f" * 64,
        "languages": LANGS,
        "options": {"joined": True},
        "vocabularies": {"joined": {"files": ["vocab.subwords"]}},
    }
    return Vocabulary(str(folder), doc)


def test_a_part_is_encoded_into_both_formats(tmp_path):
    vocab = t2t_vocabulary(tmp_path)
    en, zh = example_lines("tatoeba-cmn", "en", 700), example_lines("tatoeba-cmn", "zh", 700)
    shard = str(tmp_path / "train-00000-of-00001.parquet")
    written = fsio.write_parquet(
        shard, pa.table({"id": list(range(700)), "src": en, "tgt": zh}), row_group_size=300
    )
    out = str(tmp_path / "out")
    spec = EncodeSpec(
        out, vocab.root, vocab.doc, LANGS, ("arrow", "fairseq"), "uint16", "uint16", 128
    )
    entry = manifest.file_entry(str(tmp_path), written, "pairs", 700)
    # rows 300..699: two of the shard's three row groups, checked page by page
    task = EncodeTask("train", 1, 3, str(tmp_path), entry, (1, 2), False, "fairseq/train1.en-zh")
    encoder = SubwordTextEncoder.from_text((tmp_path / "vocab.subwords").read_text())
    expected_tokens = sum(len(encoder.encode(line)) + 1 for line in en[300:])

    def check(outputs):
        files = sorted((v["path"], v["kind"], v["rows"]) for k, v in outputs if k == "file")
        assert files == [
            ("arrow/train-00001-of-00003.arrow", "arrow", 400),
            ("fairseq/train1.en-zh.en.bin", "fairseq-bin", 400),
            ("fairseq/train1.en-zh.en.idx", "fairseq-idx", 400),
            ("fairseq/train1.en-zh.zh.bin", "fairseq-bin", 400),
            ("fairseq/train1.en-zh.zh.idx", "fairseq-idx", 400),
        ]
        (stats,) = [v for k, v in outputs if k == "stats"]
        train = stats["splits"]["train"]
        assert train["pairs"] == 400 and train["src"]["tokens"] == expected_tokens
        assert train["src"]["unk"] == 0 and sum(train["tgt"]["length_hist"].values()) == 400

    options = PipelineOptions(IN_MEMORY)
    with TestPipeline(options=options) as p:
        encoded = p | beam.Create([task]) | beam.ParDo(EncodePartFn(spec))
        assert_that(encoded, check)
    bins = MMapDataset(f"{out}/fairseq/train1.en-zh.en.idx", f"{out}/fairseq/train1.en-zh.en.bin")
    assert len(bins) == 400
    assert (bins[0][:-1] - 2).tolist() == encoder.encode(en[300])  # fairseq id = T2T id + 2


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
