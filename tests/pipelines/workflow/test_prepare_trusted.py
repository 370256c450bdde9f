"""`prepare --trustedpref`: trusted pairs the learned pair scorers learn from besides the
corpus, on real runners; they are never written, they are part of the fingerprint, and
the thresholds they set (`--trusted-keep`) are what `rethreshold` starts from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.cli.commands.prepare import report
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig, QualityConfig, make_plan
from nmtpipe.pipelines.workflow.rethreshold import run_rethreshold
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.quality.kinds.length import LengthConfig
from nmtpipe.transforms.quality.kinds.lexical import LexicalConfig
from tests.helpers import IN_MEMORY, MULTI_PROCESS, example_lines, write_pair

MISALIGNED = 40


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """A corpus of 300 Tatoeba pairs and 40 pairs of a sentence with another's
    translation, and 6,000 other Tatoeba pairs as the trusted ones."""
    folder = tmp_path_factory.mktemp("trusted")
    en, zh = example_lines("tatoeba-cmn", "en"), example_lines("tatoeba-cmn", "zh")
    clean = list(range(0, 30000, 100))
    wrong = list(range(50, 30000, 750))[:MISALIGNED]
    corpus = write_pair(
        folder / "corpus",
        [en[i] for i in clean + wrong],
        [zh[i] for i in clean] + [zh[i] for i in wrong[1:] + wrong[:1]],
    )
    used = set(clean + wrong)
    others = [i for i in range(1, 30000, 5) if i not in used][:6000]
    trusted = write_pair(folder / "trusted", [en[i] for i in others], [zh[i] for i in others])
    return corpus, trusted


def prepare(corpus, output, beam_args=IN_MEMORY, **kwargs):
    config = PrepareConfig("en", "zh", str(output), trainpref=(str(corpus),), **kwargs)
    return run_prepare(config, list(beam_args))


def rejects(output) -> list[dict]:
    return pq.read_table(output / "rejects").to_pylist()


def test_trusted_pairs_are_learned_from_and_never_written(corpora, tmp_path):
    corpus, trusted = corpora
    alone = prepare(corpus, tmp_path / "alone")
    own = alone.stats["learned"]["lexical"]  # the pairs that the cleaning kept
    assert 320 < own <= alone.stats["pairs_read"] == 340
    assert not alone.stats["rejects"].get("lexical")  # under --lexical-min-pairs: none

    out = tmp_path / "with"  # the scorers' own thresholds
    outcome = prepare(corpus, out, trustedpref=(str(trusted),), trusted_keep=0.0)
    learned = outcome.stats["learned"]["lexical"]
    assert own + 5900 < learned <= own + 6000  # and the trusted pairs the cleaning kept
    assert outcome.stats["pairs_read"] == 340  # the corpus's, as before
    lexical = [r["line"] for r in rejects(out) if r["reason"] == "lexical"]
    found = sum(line > 300 for line in lexical)  # the misaligned pairs' lines
    assert found >= MISALIGNED / 2 and len(lexical) - found <= 10  # few of the 300 others
    origins = {f"{corpus}.{{en,zh}}"}
    written = [f["path"] for f in outcome.manifest["files"] if f["path"].endswith(".parquet")]
    tables = [pq.read_table(out / path) for path in written]
    assert {o for t in tables if "origin" in t.column_names for o in t["origin"].to_pylist()} == (
        origins
    )
    given = outcome.manifest["options"]["trusted"]
    assert [t["origin"] for t in given["pairs"]] == [f"{trusted}.{{en,zh}}"] and given["keep"] == 0
    assert "calibrated" not in outcome.stats
    assert outcome.manifest["fingerprint"] != alone.manifest["fingerprint"]
    assert f"the trusted {trusted}.{{en,zh}}" in report(outcome)
    assert "scores learned from" not in report(alone)


def data_files(outcome) -> dict[str, str]:
    """The shards, rejects and counts (the statistics say how they were judged)."""
    return {f["path"]: f["sha256"] for f in outcome.manifest["files"] if f["path"] != "stats.json"}


def test_thresholds_the_trusted_pairs_set_judge_and_rethreshold_starts_from_them(corpora, tmp_path):
    corpus, trusted = corpora
    out = tmp_path / "calibrated"
    outcome = prepare(corpus, out, MULTI_PROCESS, trustedpref=(str(trusted),))  # keep 0.99
    set_ = outcome.stats["calibrated"]
    assert set(set_) == {"lexical", "length"}
    lexical_min, deviation = set_["lexical"]["lexical_min"], set_["length"]["length_max_deviation"]
    train = pq.read_table(out / outcome.manifest["splits"]["train"]["files"][0])
    assert np.nanmin(train["score_lexical"].to_numpy()) >= lexical_min
    assert np.nanmax(np.abs(train["score_length"].to_numpy())) <= deviation
    judged = [r for r in rejects(out) if r["reason"] == "lexical"]
    assert judged and all(dict(r["scores"])["lexical"] < lexical_min for r in judged)
    assert f"--lexical-min {lexical_min:g}" in report(outcome)
    stricter = prepare(corpus, tmp_path / "stricter", trustedpref=(str(trusted),), trusted_keep=0.9)
    assert stricter.stats["calibrated"]["lexical"]["lexical_min"] > lexical_min

    # Other thresholds from there: as prepare with them given, the trusted pairs' off.
    again = run_rethreshold(str(out), str(tmp_path / "again"), {}, IN_MEMORY)
    assert data_files(again) == data_files(outcome)
    assert again.manifest["options"]["trusted"]["keep"] == 0
    quality = QualityConfig(
        lexical=LexicalConfig(lexical_min=lexical_min),
        length=LengthConfig(length_max_deviation=deviation),
    )
    explicit = prepare(
        corpus,
        tmp_path / "explicit",
        trustedpref=(str(trusted),),
        trusted_keep=0.0,
        quality=quality,
    )
    assert explicit.manifest["fingerprint"] == again.manifest["fingerprint"]
    assert explicit.stats == again.stats
    assert data_files(explicit) == data_files(again)


def test_trusted_pairs_from_a_table_teach_what_the_same_pairs_as_files_teach(corpora, tmp_path):
    corpus, trusted = corpora
    table = tmp_path / "trusted.parquet"
    sides = {
        lang: Path(f"{trusted}.{lang}").read_text(encoding="utf-8").splitlines()
        for lang in ("en", "zh")
    }
    pq.write_table(pa.table(sides), table)
    files = prepare(corpus, tmp_path / "files", trustedpref=(str(trusted),))
    tables = prepare(corpus, tmp_path / "tables", trusted_table=(str(table),))
    assert tables.stats["calibrated"] == files.stats["calibrated"]
    assert data_files(tables) == data_files(files)
    assert tables.manifest["options"]["trusted"]["pairs"][0]["layout"] == "parquet"


def test_trusted_pairs_must_be_other_files_and_need_a_learned_scorer(corpora, tmp_path):
    corpus, trusted = corpora
    with pytest.raises(ConfigError, match="given both as trusted pairs and as an input"):
        make_plan(
            PrepareConfig(
                "en", "zh", str(tmp_path), trainpref=(str(corpus),), trustedpref=(str(corpus),)
            )
        )
    with pytest.raises(
        ConfigError, match="--trustedpref, --trusted-table: none of the chosen scorers learns"
    ):
        PrepareConfig(
            "en",
            "zh",
            str(tmp_path),
            trainpref=(str(corpus),),
            trustedpref=(str(trusted),),
            quality=QualityConfig(scorers=("rules",)),
        )
