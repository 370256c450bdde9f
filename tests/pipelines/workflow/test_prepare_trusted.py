"""`prepare --trustedpref`: trusted pairs the learned pair scorers learn from besides the
corpus, on real runners; they are never written, and they are part of the fingerprint."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from nmtpipe.pipelines.cli.commands.prepare import report
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig, QualityConfig, make_plan
from nmtpipe.transforms.errors import ConfigError
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

    out = tmp_path / "with"
    outcome = prepare(corpus, out, trustedpref=(str(trusted),))
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
    assert [t["origin"] for t in outcome.manifest["options"]["trusted"]] == [f"{trusted}.{{en,zh}}"]
    assert outcome.manifest["fingerprint"] != alone.manifest["fingerprint"]
    assert f"the trusted {trusted}.{{en,zh}}" in report(outcome)
    assert "scores learned from" not in report(alone)

    spread = prepare(corpus, tmp_path / "spread", MULTI_PROCESS, trustedpref=(str(trusted),))
    hashes = [{f["path"]: f["sha256"] for f in o.manifest["files"]} for o in (outcome, spread)]
    assert hashes[0] == hashes[1]


def test_trusted_pairs_must_be_other_files_and_need_a_learned_scorer(corpora, tmp_path):
    corpus, trusted = corpora
    with pytest.raises(ConfigError, match="given both as --trustedpref and as an input"):
        make_plan(
            PrepareConfig(
                "en", "zh", str(tmp_path), trainpref=(str(corpus),), trustedpref=(str(corpus),)
            )
        )
    with pytest.raises(ConfigError, match="--trustedpref: none of the chosen scorers learns"):
        PrepareConfig(
            "en",
            "zh",
            str(tmp_path),
            trainpref=(str(corpus),),
            trustedpref=(str(trusted),),
            quality=QualityConfig(scorers=("rules",)),
        )
