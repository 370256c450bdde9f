"""The prepare graph's composites, each alone on a real runner (TestPipeline/assert_that)."""

from __future__ import annotations

import dataclasses
import json

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from nmtpipe.transforms.beam.prepare import (
    CleanChunks,
    ConfirmLanguages,
    CountTokens,
    PrepareCorpus,
    PrepareSpec,
    ProtectSplits,
    WritePairShards,
    WriteRejectFiles,
)
from nmtpipe.transforms.beam.prepare_fns import (
    COUNTS,
    FILES,
    PROTECTED,
    REJECTS,
    SHARDS_PER_JUDGE,
    STATS,
)
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.formats.batch_transport import (
    Shipped,
    inline,
    pairs_table,
    receive_table,
    rejects_table,
)
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.clean import CleanConfig
from nmtpipe.transforms.text.langid.identifier import LangIdConfig
from nmtpipe.transforms.text.overlap import Protected
from nmtpipe.transforms.text.records import Reject, pair_batch, reject_batch
from nmtpipe.transforms.text.split import SplitConfig
from nmtpipe.transforms.vocab.counts import COUNTS_SCHEMA
from tests.helpers import IN_MEMORY, write_pair

EN = ["Hello, world.", "same", "A cat.", "", "A cat."]
ZH = ["你好，世界。", "same", "一只猫。", "空", "一只猫。"]
LANGS = ("en", "zh")


def spec(tmp_path, corpus=None) -> PrepareSpec:
    inputs = () if corpus is None else (CorpusInput("train", f"{corpus}.en", f"{corpus}.zh"),)
    return PrepareSpec(
        output=str(tmp_path / "out"),
        inputs=inputs,
        clean=CleanConfig(split=SplitConfig(carve=(), shards=(("train", 1),))),
        langs=LANGS,
        shard_counts={"train": 1},
        count_buckets=1,
        reject_shards=1,
        chunk_lines=2,
    )


def test_clean_chunks_keys_pairs_and_tags_rejects_counts_and_stats(tmp_path):
    corpus = write_pair(tmp_path / "train", EN, ZH)
    s = spec(tmp_path, corpus)
    with TestPipeline(argv=IN_MEMORY) as p:
        out = p | beam.Create(s.inputs) | CleanChunks(s, spill_dir=None)
        keys = out.pairs | "Keys" >> beam.Keys()
        assert_that(keys, equal_to([("train", 0)] * 3), label="a batch per chunk of 2 lines")
        reasons = (
            out[REJECTS]
            | beam.Values()
            | beam.FlatMap(lambda item: rejects_table([item])["reason"].to_pylist())
        )
        assert_that(reasons, equal_to(["copy", "empty"]), label="rejects")
        read = out[STATS] | beam.Map(lambda s: s["pairs_read"]) | beam.CombineGlobally(sum)
        assert_that(read, equal_to([5]), label="pairs read")
        sides = out[COUNTS] | beam.Map(lambda kv: kv[1][0])
        assert_that(sides | beam.Distinct(), equal_to(["en", "zh"]), label="counted sides")


@pytest.mark.parametrize("spilled", [False, True])
def test_write_pair_shards_drops_duplicates_and_overlap_and_takes_their_tokens_back(
    tmp_path, spilled
):
    s = spec(tmp_path)
    # Spilled (local runners): the side input is only a reference to the set's file.
    spill = str(tmp_path / "spill") if spilled else None
    batch = pair_batch("c", _array([7, 7, 9]), ["A cat.", "A cat.", "Hi."], ["猫", "猫", "嗨"],
                       _array([3, 5, 1]))  # fmt: skip
    test_batch = pair_batch("t", _array([11]), ["hi!"], ["你好"], _array([4]))
    with TestPipeline(argv=IN_MEMORY) as p:
        pairs = p | "Pairs" >> beam.Create([(("train", 0), inline(batch))])
        protected = (
            p
            | "Test pairs" >> beam.Create([Protected.of_batch("test", test_batch)])
            | ProtectSplits(spill)
        )
        shipped = protected | "Shipped as" >> beam.Map(lambda p: type(p).__name__)
        assert_that(shipped, equal_to(["SpillRef" if spilled else "Protected"]), label="side")
        out = (pairs, protected) | WritePairShards(s, spill)
        files = out[FILES] | beam.Map(lambda f: (f["path"], f["rows"]))
        assert_that(files, equal_to([("train-00000-of-00001.parquet", 1)]), label="files")
        dropped = (
            out[REJECTS]
            | beam.Values()
            | beam.FlatMap(lambda item: rejects_table([item]).to_pylist())
            | beam.Map(lambda r: (r["line"], r["reason"], r["detail"]))
        )
        expected_rejects = [
            (5, "duplicate", "same pair as c:3"),
            (1, "overlap", "src is also the src of test pair t:4"),
        ]
        assert_that(dropped, equal_to(expected_rejects), label="rejects")
        negative = out[COUNTS] | beam.MapTuple(lambda _, part: (part[0], _counts(part[1])))
        expected = [
            ("en", {t: -c for t, c in t2t_tokenizer.count_tokens(["A cat.", "Hi."]).items()}),
            ("zh", {"猫": -1, "嗨": -1}),
        ]
        assert_that(negative, equal_to(expected), label="counts taken back")
    rows = pq.read_table(tmp_path / "out" / "train-00000-of-00001.parquet").to_pylist()
    assert [(r["id"], r["line"]) for r in rows] == [(7, 3)]


def test_write_reject_files_gathers_every_source_into_its_shard(tmp_path):
    def reject(line: int, reason: str) -> tuple[int, bytes]:
        return 0, inline(reject_batch([Reject("c", line, reason, "", b"s", b"t")]))

    with TestPipeline(argv=IN_MEMORY) as p:
        cleaning = p | "Cleaning" >> beam.Create([reject(2, "copy"), reject(9, "empty")])
        shards = p | "Shards" >> beam.Create([reject(4, "duplicate")])
        files = (cleaning, shards) | WriteRejectFiles(str(tmp_path / "out"), 1)
        assert_that(
            files | beam.Map(lambda f: (f["path"], f["rows"])),
            equal_to([("rejects/rejects-00000-of-00001.parquet", 3)]),
        )
    table = pq.read_table(tmp_path / "out" / "rejects" / "rejects-00000-of-00001.parquet")
    assert table["line"].to_pylist() == [2, 4, 9]  # sorted by (origin, line, reason)


def _counts(item: Shipped) -> dict[str, int]:
    table = receive_table(item)
    return dict(zip(table["token"].to_pylist(), table["count"].to_pylist(), strict=True))


def _shipped(side: str, counts: dict[str, int]) -> tuple[int, tuple[str, bytes]]:
    table = pa.table({"token": list(counts), "count": list(counts.values())}, COUNTS_SCHEMA)
    return 0, (side, inline(table.to_batches()[0]))


def test_count_tokens_sums_partials_and_writes_the_alphabet(tmp_path):
    chunk_counts = [_shipped("en", {"cat": 2, "dog": 1}), _shipped("en", {"cat": 1}),
                    _shipped("zh", {"猫": 3})]  # fmt: skip
    duplicates = [_shipped("en", {"dog": -1})]
    out = str(tmp_path / "out")
    with TestPipeline(argv=IN_MEMORY) as p:
        counts = (
            p | "Chunks" >> beam.Create(chunk_counts),
            p | "Duplicates" >> beam.Create(duplicates),
        ) | CountTokens(out, LANGS, buckets=1)
        files = [
            ("counts/en-00000-of-00001.parquet", 1),
            ("counts/zh-00000-of-00001.parquet", 1),
            ("counts/joined-00000-of-00001.parquet", 2),
            ("counts/chars.parquet", 8),
        ]
        found = counts[FILES] | beam.Map(lambda f: (f["path"], f["rows"]))
        assert_that(found, equal_to(files), label="files")
        totals = [{"splits": {"train": {side: {"tokens": 3}}}} for side in ("src", "tgt")]
        tokens = counts[STATS] | beam.Map(json.dumps)
        assert_that(tokens, equal_to([json.dumps(t) for t in totals]), label="stats")
    joined = pq.read_table(f"{out}/counts/joined-00000-of-00001.parquet").to_pylist()
    assert joined == [{"token": "cat", "count": 3}, {"token": "猫", "count": 3}]


def test_prepare_corpus_leaves_one_summary_for_the_driver(tmp_path):
    corpus = write_pair(tmp_path / "train", EN, ZH)
    s = spec(tmp_path, corpus)
    summary_url = str(tmp_path / "summary.json")
    with TestPipeline(argv=IN_MEMORY) as p:
        done = p | PrepareCorpus(s, summary_url)
        assert_that(done, equal_to([None]))
    summary = json.loads((tmp_path / "summary.json").read_text())
    kinds = sorted({f["kind"] for f in summary["files"]})
    assert kinds == ["chars", "counts", "pairs", "rejects"]
    stats = summary["stats"]
    assert stats["pairs_read"] == 5 and stats["rejects"] == {"copy": 1, "duplicate": 1, "empty": 1}
    assert stats["splits"]["train"]["pairs"] == 2


def _array(values: list[int]):
    import pyarrow as pa

    return pa.array(values, pa.int64())


def test_confirm_languages_judges_pending_pairs_with_the_accurate_model(tmp_path):
    """What the cleaners left pending, a batch per chunk and shard, comes out as kept
    pair batches under their (split, shard), rejects with the line as read, the kept
    train pairs' tokens and the kept valid pairs' protection."""
    german = "Die Regierung hat am Montag neue Verkehrsregeln beschlossen."
    english = "The government passed new traffic rules on Monday."

    def pending(split, src, raw=None, shard=0, lines=(3, 9)):
        ids = pa.array([len(src[0]), 7 + shard])
        batch = pair_batch("in.{en,zh}", ids, src, ["中文", "中文"], pa.array(lines), raw)
        return shard // SHARDS_PER_JUDGE, ((split, shard), inline(batch))

    s = spec(tmp_path)
    s = dataclasses.replace(s, clean=CleanConfig(langid=LangIdConfig("en", "zh")))
    items = [
        pending("train", [german, english], ([german + " ", None], [None, None])),
        pending("valid", [english, german]),
        pending("train", [english, german], shard=1, lines=(20, 21)),
    ]
    with TestPipeline(argv=IN_MEMORY) as p:
        out = p | beam.Create(items) | ConfirmLanguages(s)
        kept = out.pairs | beam.MapTuple(lambda key, item: (key, rows_of(item)))
        assert_that(
            kept,
            equal_to(
                [
                    (("train", 0), [(9, english, None)]),
                    (("valid", 0), [(3, english, None)]),
                    (("train", 1), [(20, english, None)]),
                ]
            ),
            label="kept",
        )
        rejects = (
            out[REJECTS]
            | beam.Values()
            | beam.Map(lambda item: rejects_table([item]).to_pylist())
            | beam.FlatMap(lambda rows: [(r["line"], r["reason"], r["src"]) for r in rows])
        )
        expected = [
            (3, "wrong-language", (german + " ").encode()),
            (9, "wrong-language", german.encode()),
            (21, "wrong-language", german.encode()),
        ]
        assert_that(rejects, equal_to(expected), label="rejects")
        tokens = out[COUNTS] | beam.MapTuple(lambda _, part: (part[0], sorted(_counts(part[1]))))
        assert_that(
            tokens,
            equal_to([("en", sorted(set(t2t_tokenizer.encode(english)))), ("zh", ["中文"])]),
            label="train tokens",
        )
        protected = out[PROTECTED] | beam.FlatMap(lambda part: part.keys("id")[0].to_pylist())
        assert_that(protected, equal_to([len(english)]), label="the kept valid pair's id")


def rows_of(item: bytes) -> list[tuple]:
    table = pairs_table([item])
    return list(zip(*(table[c].to_pylist() for c in ("line", "src", "src_raw")), strict=True))
