"""Dataset cards: `datasets.load_dataset` on a prepared or encoded output gives its splits,
with their rows, and nothing else (no counts, rejects or fairseq files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab
from nmtpipe.transforms.formats.dataset_card import CARD_FILE, dataset_card, split_shards
from nmtpipe.transforms.vocab.kinds.spm_vocab import SpmConfig
from tests.helpers import IN_MEMORY, prepare_example

datasets = pytest.importorskip("datasets")


def _rows(root: str, kind: str) -> dict[str, int]:
    doc = json.loads((Path(root) / "manifest.json").read_text())
    assert CARD_FILE in {f["path"] for f in doc["files"]}  # committed with the output
    out: dict[str, int] = {}
    for f in doc["files"]:
        if f["kind"] == kind:
            out[f["split"]] = out.get(f["split"], 0) + f["rows"]
    return out


def test_load_dataset_gives_the_splits_of_prepared_and_encoded_outputs(tmp_path):
    prepared = prepare_example(tmp_path, 20, valid_fraction=0.05, test_fraction=0.05)
    vocab, encoded = str(tmp_path / "vocab"), str(tmp_path / "encoded")
    spm = SpmConfig(character_coverage=0.98)
    run_vocab(VocabConfig(prepared, vocab, "unigram", 1000, joined=True, spm=spm), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, encoded), IN_MEMORY)
    assert (Path(encoded) / "fairseq").is_dir() and (Path(prepared) / "counts").is_dir()
    cache = str(tmp_path / "hf-cache")
    for root, kind in ((prepared, "pairs"), (encoded, "arrow")):
        loaded = datasets.load_dataset(root, cache_dir=cache)
        rows = _rows(root, kind)
        assert set(rows) == {"train", "valid", "test"}
        assert {split: len(loaded[split]) for split in loaded} == rows
    pairs = datasets.load_dataset(prepared, cache_dir=cache)["test"]
    assert pairs.column_names == [
        "id",
        "src",
        "tgt",
        "origin",
        "line",
        "src_raw",
        "tgt_raw",
        "score_lexical",
        "score_length",
    ]
    ids = datasets.load_dataset(encoded, cache_dir=cache)["test"]
    assert ids.column_names == ["id", "src", "tgt"] and ids[0]["src"][-1] == 2  # EOS


def test_card_lists_shards_in_split_order():
    files = [
        {"kind": "pairs", "split": s, "path": f"{s}-{k:05d}-of-00002.parquet", "rows": 3}
        for s in ("test", "valid", "train")
        for k in (1, 0)
    ] + [{"kind": "counts", "path": "counts/en-00000-of-00001.parquet", "rows": 9}]
    shards = split_shards(files, "pairs")
    assert list(shards) == ["train", "valid", "test"]
    assert [f["path"] for f in shards["train"]] == [
        "train-00000-of-00002.parquet",
        "train-00001-of-00002.parquet",
    ]
    card = dataset_card("t", ["about"], shards, "`src`")
    assert card.startswith("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train")
    assert "counts/" not in card and "| train | 6 | 2 |" in card
    assert dataset_card("t", [], {}, "x").startswith("---\n---\n")
