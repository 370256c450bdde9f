"""`rethreshold`: a prepared dataset judged again by other thresholds is, to the byte and
to the fingerprint, what `prepare` with those thresholds commits, without the corpus."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.cli import flags
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig
from nmtpipe.pipelines.workflow.rethreshold import run_rethreshold
from nmtpipe.transforms.errors import ConfigError, InputError
from tests.helpers import IN_MEMORY, MULTI_PROCESS, example_lines, write_pair

STRICT = {"lexical_min": 1.0, "length_max_deviation": 2.5, "fluency_min": -1.0}
LOOSE = {"lexical_min": 0.0, "length_max_deviation": 5.0, "fluency_min": -6.0}
THRESHOLDS = {"strict": STRICT, "loose": LOOSE}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Any]:
    """Tatoeba with a tenth of its targets misaligned and some sources spaced twice (so
    that carved valid and test pairs keep the lines as read), and a valid set given."""
    folder = tmp_path_factory.mktemp("corpus")
    src = example_lines("tatoeba-cmn", "en", 3100)
    tgt = example_lines("tatoeba-cmn", "zh", 3100)
    train_src = [s.replace(" ", "  ", 1) if i % 5 == 0 else s for i, s in enumerate(src[:3000])]
    train_tgt = [tgt[i + 7] if i % 10 == 3 else t for i, t in enumerate(tgt[:3000])]
    return {
        "trainpref": (str(write_pair(folder / "train", train_src, train_tgt)),),
        "validpref": (str(write_pair(folder / "valid", src[3000:], tgt[3000:])),),
        "valid_fraction": 0.03,
        "test_fraction": 0.03,
        "num_shards": 2,
        "scorers": ("rules", "lexical", "length", "fluency", "neardup"),
        **{f"{name}_min_pairs": 1 for name in ("lexical", "length", "fluency")},
    }


def prepare(corpus: dict[str, Any], output: Path, thresholds: dict[str, float], args=IN_MEMORY):
    values = {"src_lang": "en", "tgt_lang": "zh", "output": str(output), **corpus, **thresholds}
    return run_prepare(flags.make(PrepareConfig, values), list(args))


def data_files(outcome) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in outcome.manifest["files"] if f["kind"] != "card"}


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("prepared")
    return {
        name: prepare(corpus, folder / name, t)
        for name, t in (("strict", STRICT), ("loose", LOOSE))
    }


@pytest.mark.parametrize(("source", "target"), [("strict", "loose"), ("loose", "strict")])
def test_rethresholded_is_what_prepare_with_those_thresholds_commits(
    prepared, source, target, tmp_path
):
    out = tmp_path / "out"
    outcome = run_rethreshold(prepared[source].output, str(out), THRESHOLDS[target], IN_MEMORY)
    expected = prepared[target]
    assert outcome.manifest["fingerprint"] == expected.manifest["fingerprint"]
    assert data_files(outcome) == data_files(expected)
    assert outcome.stats == expected.stats
    # It moved pairs both ways, in every split the scorers judge, raw lines kept with them.
    before, after = prepared[source].stats["rejects"], outcome.stats["rejects"]
    for reason in ("lexical", "length", "fluency"):
        assert before.get(reason, 0) != after.get(reason, 0)
    moved = _judged_rejects(prepared["strict"].output)
    assert pc.sum(pc.is_valid(moved["src_raw"])).as_py() > 0


def _judged_rejects(output: str):
    table = pq.read_table(Path(output) / "rejects")
    return table.filter(pc.is_valid(table["scores"]))


def test_prepare_with_the_new_thresholds_finds_it_committed(corpus, prepared, tmp_path):
    out = tmp_path / "out"
    run_rethreshold(prepared["strict"].output, str(out), LOOSE, MULTI_PROCESS)
    assert prepare(corpus, out, LOOSE).cached
    again = run_rethreshold(prepared["strict"].output, str(out), LOOSE, IN_MEMORY)
    assert again.cached


def test_from_and_to_s3(prepared, s3):
    import s3fs

    s3fs.S3FileSystem().put(prepared["strict"].output, f"{s3}/strict", recursive=True)
    outcome = run_rethreshold(f"{s3}/strict", f"{s3}/loose", LOOSE, IN_MEMORY)
    assert data_files(outcome) == data_files(prepared["loose"])


def test_the_corpus_is_not_read(corpus, prepared, tmp_path):
    source = tmp_path / "source"
    shutil.copytree(prepared["strict"].output, source)
    moved = tmp_path / "corpus-gone"
    Path(corpus["trainpref"][0]).parent.rename(moved)
    try:
        outcome = run_rethreshold(str(source), str(tmp_path / "out"), LOOSE, IN_MEMORY)
    finally:
        moved.rename(Path(corpus["trainpref"][0]).parent)
    assert data_files(outcome) == data_files(prepared["loose"])


def test_only_thresholds_of_its_scorers_change(prepared, tmp_path, small_corpus):
    source = prepared["strict"].output
    with pytest.raises(ConfigError, match="a new folder"):
        run_rethreshold(source, source, LOOSE, IN_MEMORY)
    plain = tmp_path / "plain"
    values = {"src_lang": "en", "tgt_lang": "zh", "output": str(plain)}
    values |= {"trainpref": (str(small_corpus),), "scorers": ("rules", "lexical")}
    run_prepare(flags.make(PrepareConfig, values), IN_MEMORY)
    with pytest.raises(ConfigError, match=r"--fluency-min: .* was not scored by fluency"):
        run_rethreshold(str(plain), str(tmp_path / "out"), {"fluency_min": 0.0}, IN_MEMORY)
    with pytest.raises(InputError, match="holds no committed prepare output"):
        run_rethreshold(str(tmp_path / "nothing"), str(tmp_path / "out"), LOOSE, IN_MEMORY)
    older = tmp_path / "older"
    shutil.copytree(plain, older)
    stats = json.loads((older / "stats.json").read_text())
    del stats["learned"]
    (older / "stats.json").write_text(json.dumps(stats))
    _rehash(older, "stats.json")
    with pytest.raises(InputError, match="prepared before nmtpipe recorded what its scorers"):
        run_rethreshold(str(older), str(tmp_path / "out"), {"lexical_min": 0.0}, IN_MEMORY)


def _rehash(root: Path, name: str) -> None:
    """The manifest's entry of `name` made true again (a file an older nmtpipe wrote)."""
    doc = json.loads((root / "manifest.json").read_text())
    data = (root / name).read_bytes()
    for entry in doc["files"]:
        if entry["path"] == name:
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (root / "manifest.json").write_text(json.dumps(doc))


def _model_scores(prepared: str, folder: Path, low_every: int = 4) -> Path:
    """Score files as `nmtpipe score` writes them (its models stood in for): every
    `low_every`-th train pair of each shard scored 0.01, the others 0.5."""
    from nmtpipe.trainers.runtime.run_files import SCORE_SUMMARY
    from nmtpipe.transforms.quality.models import dcce

    doc = json.loads((Path(prepared) / "manifest.json").read_text())
    folder.mkdir()
    for path in doc["splits"]["train"]["files"]:
        ids = pq.read_table(Path(prepared) / path, columns=["id"])["id"]
        low = np.arange(len(ids)) % low_every == 0
        h = np.where(low, 4.0, 0.5).astype(np.float32)
        values = [ids, pa.array(h), pa.array(h), pa.array(dcce.dcce(h, h), pa.float32())]
        pq.write_table(pa.Table.from_arrays(values, schema=dcce.SCHEMA), folder / path)
    model = {"url": "seed/checkpoint_best.pt", "sha256": "ab" * 32}
    summary = {"prepared": {"url": prepared, "fingerprint": doc["fingerprint"]},
               "forward": model, "backward": {**model, "sha256": "cd" * 32}}  # fmt: skip
    (folder / SCORE_SUMMARY).write_text(json.dumps(summary))
    return folder


def test_model_scores_reject_the_train_pairs_below_dcce_min(prepared, tmp_path):
    source = prepared["loose"]
    scores = _model_scores(source.output, tmp_path / "scores")
    out = tmp_path / "out"
    outcome = run_rethreshold(source.output, str(out), {}, IN_MEMORY, (str(scores), 0.05))
    low = sum(-(-f["rows"] // 4) for f in source.manifest["files"]
              if f.get("kind") == "pairs" and f["split"] == "train")  # fmt: skip
    assert outcome.stats["rejects"]["dcce"] == low
    assert outcome.stats["splits"]["train"] == source.stats["splits"]["train"] - low
    assert outcome.stats["splits"]["valid"] == source.stats["splits"]["valid"]
    # The kept pairs carry the score; the rejects keep it with their reason.
    kept = pq.read_table(out / "train-00000-of-00002.parquet")
    assert (kept["score_dcce"].to_numpy() >= 0.05).all()
    rejects = _judged_rejects(str(out)).filter(pc.equal(pc.field("reason"), "dcce"))
    assert rejects.num_rows == low
    assert all(dict(m)["dcce"] < 0.05 for m in rejects["scores"].to_pylist())
    # The histogram, the threshold and the models are the dataset's.
    hist = outcome.stats["scores"]["dcce"]
    assert sum(hist["rejected"].values()) == low and hist["kept"]
    recorded = outcome.manifest["options"]["quality"]["dcce"]
    assert recorded["dcce_min"] == 0.05 and recorded["backward"]["sha256"] == "cd" * 32
    assert outcome.manifest["fingerprint"] != source.manifest["fingerprint"]
    # Judged again without the model scores, the pairs come back: the source's dataset.
    back = run_rethreshold(str(out), str(tmp_path / "back"), {}, IN_MEMORY)
    assert back.manifest["fingerprint"] == source.manifest["fingerprint"]
    assert data_files(back) == data_files(source)


def test_model_scores_of_another_dataset_are_refused(prepared, tmp_path):
    scores = _model_scores(prepared["strict"].output, tmp_path / "scores")
    with pytest.raises(InputError, match="not this dataset"):
        run_rethreshold(
            prepared["loose"].output, str(tmp_path / "out"), {}, IN_MEMORY, (str(scores), 0.05)
        )
    with pytest.raises(InputError, match="no finished scores"):
        run_rethreshold(
            prepared["loose"].output, str(tmp_path / "o"), {}, IN_MEMORY, (str(tmp_path), 0.05)
        )
