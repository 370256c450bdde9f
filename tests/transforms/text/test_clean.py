"""The chunk cleaner: decoding, rejects with origin and reason, batches by shard."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from nmtpipe.transforms.corpus.raw_corpus import RawChunk, Unread
from nmtpipe.transforms.text.clean import ChunkCleaner, CleanConfig, PairConfirmer
from nmtpipe.transforms.text.langid.identifier import LangIdConfig
from nmtpipe.transforms.text.normalize import NormalizeConfig
from nmtpipe.transforms.text.split import SplitConfig
from nmtpipe.transforms.text.t2t_tokenizer import encode
from tests.helpers import DATA, example_lines

SPLIT = SplitConfig(carve=(), shards=(("train", 2),))


def clean(src: bytes, tgt: bytes | None, columns=(0, 1), config: CleanConfig | None = None):
    chunk = RawChunk("corpus.{en,zh}", "train", 11, src, tgt, columns)
    return ChunkCleaner(config or CleanConfig(split=SPLIT))(chunk)


def kept(out) -> list[tuple]:
    rows = []
    for batch in out.pairs.values():
        rows += zip(*(batch.column(c).to_pylist() for c in ("line", "src", "tgt")), strict=True)
    return sorted(rows)


def test_kept_pairs_are_normalised_and_numbered_from_the_chunk_start():
    out = clean("Hello,  world!\r\nＯＫ？\r\n".encode()[:-2], "你好，世界！\n好的？".encode())
    assert out.pairs_read == 2
    assert kept(out) == [(11, "Hello, world!", "你好,世界!"), (12, "OK?", "好的?")]
    assert out.rejects == []
    src, tgt = (sorted(tokens.to_pylist()) for tokens in out.train_tokens)
    assert src == sorted(["Hello", ", ", "world", "!", "OK", "?"])
    assert tgt == sorted(["你好", ",", "世界", "!", "好的", "?"])


def test_invalid_utf8_is_a_reject_with_side_byte_and_raw_bytes():
    out = clean(b"good\nbad \xff here\nfine", b"ok\nok2\n\xc3")
    assert [(r.line, r.reason, r.detail) for r in out.rejects] == [
        (12, "invalid-utf8", "src: invalid start byte at byte 4"),
        (13, "invalid-utf8", "tgt: unexpected end of data at byte 0"),
    ]
    assert out.rejects[0].src == b"bad \xff here" and out.rejects[0].tgt == b"ok2"
    assert [line for line, *_ in kept(out)] == [11]


def test_each_side_is_decoded_in_its_encoding_and_the_readers_rejects_join():
    zh = "你好\r\n坏\r\n再见".encode("gb18030")
    zh = zh.replace("坏".encode("gb18030"), b"\x81\x20")  # no GB18030 character
    unread = (Unread(0, "bad-record", "tu 11: no zh variant", b"Hello", None),)
    chunk = RawChunk(
        "c.tmx", "train", 11, b"Hello\nBad\nGoodbye", zh, (0, 1), ("utf-8", "gb18030"), unread
    )
    out = ChunkCleaner(CleanConfig(split=SPLIT))(chunk)
    assert [(r.line, r.reason, r.detail, r.src, r.tgt) for r in out.rejects] == [
        (11, "bad-record", "tu 11: no zh variant", b"Hello", None),
        (12, "undecodable", "tgt: not gb18030: illegal multibyte sequence at byte 0", b"Bad",
         b"\x81\x20"),
    ]  # fmt: skip
    assert kept(out) == [(13, "Goodbye", "再见")]
    transcoded = RawChunk("u.{en,zh}", "train", 1, b"a", "\udc80".encode("utf-8", "surrogatepass"),
                          (0, 1), ("utf-16", "utf-16"))  # fmt: skip
    (reject,) = ChunkCleaner(CleanConfig(split=SPLIT))(transcoded).rejects
    assert reject.reason == "undecodable" and reject.detail.startswith("tgt: not utf-16: ")


def test_filter_rejects_keep_the_raw_line():
    out = clean(b"same\n\x00\x01", "same\n空".encode())
    assert [(r.line, r.reason, r.src, r.tgt) for r in out.rejects] == [
        (11, "copy", b"same", b"same"),
        (12, "empty", b"\x00\x01", "空".encode()),
    ]


def test_batches_carry_the_origin_and_split_by_shard():
    src = "\n".join(f"sentence {i}" for i in range(50)).encode()
    tgt = "\n".join(f"句子 {i}" for i in range(50)).encode()
    out = clean(src, tgt)
    assert set(out.pairs) <= {("train", 0), ("train", 1)}
    batch = next(iter(out.pairs.values()))
    assert isinstance(batch, pa.RecordBatch)
    assert set(batch.column("origin").to_pylist()) == {"corpus.{en,zh}"}
    assert sum(b.num_rows for b in out.pairs.values()) == 50


def test_only_train_pairs_are_handed_on_for_counting():
    config = CleanConfig(
        split=SplitConfig(
            valid_fraction=0.5,
            test_fraction=0.0,
            carve=("valid",),
            shards=(("train", 1), ("valid", 1)),
        )
    )
    src = "\n".join(f"s{i}" for i in range(200)).encode()
    tgt = "\n".join(f"t{i}" for i in range(200)).encode()
    out = clean(src, tgt, config=config)
    train = out.pairs[("train", 0)].column("src").to_pylist()
    counted = sorted(out.train_tokens[0].to_pylist())
    assert counted == sorted(token for line in train for token in encode(line))
    assert 50 < len(train) < 150


def test_valid_and_test_pairs_keep_the_lines_normalisation_changed():
    """Scores compare with the references the user gave: where normalisation changed a
    held-out line, the line as read is kept beside it; train keeps none."""
    config = CleanConfig(
        split=SplitConfig(valid_fraction=0.5, test_fraction=0.0, carve=("valid",),
                          shards=(("train", 1), ("valid", 1)))
    )  # fmt: skip
    src = "\r\n".join(f"Ｎo.{i}  here" if i % 2 else f"No.{i} here" for i in range(40)).encode()
    tgt = "\n".join(f"第{i}个" for i in range(40)).encode()
    out = clean(src, tgt, config=config)
    for (split, _), batch in out.pairs.items():
        columns = (batch.column(c).to_pylist() for c in ("line", "src", "src_raw", "tgt_raw"))
        for line, text, src_raw, tgt_raw in zip(*columns, strict=True):
            i = line - 11
            assert tgt_raw is None and text == f"No.{i} here"
            changed = split == "valid" and i % 2
            assert src_raw == (f"Ｎo.{i}  here" if changed else None)
    assert {split for split, _ in out.pairs} == {"train", "valid"}


def test_pairs_deferred_to_the_accurate_model_come_out_as_judging_at_once_gives():
    """A deferring cleaner never loads lingua's accurate models; the pairs it leaves
    pending, confirmed apart, make the same kept pairs, rejects and tokens."""
    en = [x.rstrip("\r") for x in example_lines("tatoeba-cmn", "en", 6000)]
    zh = [x.rstrip("\r") for x in example_lines("tatoeba-cmn", "zh", 6000)]
    chinese = (DATA / "langid" / "ntrex128-zho-CN.txt").read_text(encoding="utf-8").splitlines()
    for name in ("deu", "fra"):  # news in other languages, declared English
        en += (DATA / "langid" / f"ntrex128-{name}.txt").read_text(encoding="utf-8").splitlines()
        zh += chinese
    chunk = RawChunk(
        "mixed.{en,zh}", "train", 1, "\n".join(en).encode(), "\n".join(zh).encode(), (0, 1)
    )
    config = CleanConfig(
        tgt_normalize=NormalizeConfig(keep_fullwidth_punct=True),
        split=SplitConfig(valid_fraction=0.2, test_fraction=0.0, carve=("valid",),
                          shards=(("train", 2), ("valid", 1))),
        langid=LangIdConfig("en", "zh"),
    )  # fmt: skip
    at_once = ChunkCleaner(config)(chunk)
    cleaner = ChunkCleaner(config, defer=True)
    deferred = cleaner(chunk)
    assert not any(accurate for _, accurate in cleaner._langid._detectors)
    assert {split for split, _ in deferred.pending} == {"train", "valid"}
    pairs = {key: [batch] for key, batch in deferred.pairs.items()}
    rejects, tokens = list(deferred.rejects), [t.to_pylist() for t in deferred.train_tokens]
    confirm = PairConfirmer(config.langid)
    for key, batch in deferred.pending.items():
        confirmed = confirm(key[0], batch)
        pairs.setdefault(key, []).append(confirmed.pairs)
        rejects += confirmed.rejects
        for side, found in zip(tokens, confirmed.train_tokens, strict=True):
            side += found.to_pylist()
    reasons = Counter(r.reason for r in rejects)
    assert reasons["wrong-language"] >= 70 and len(rejects) == len(at_once.rejects)
    assert sorted(rejects) == sorted(at_once.rejects)
    assert [sorted(t) for t in tokens] == [sorted(t.to_pylist()) for t in at_once.train_tokens]
    assert pairs.keys() == at_once.pairs.keys()
    for key, batches in pairs.items():
        joined = pa.Table.from_batches(batches).sort_by("id")
        assert joined.equals(pa.Table.from_batches([at_once.pairs[key]]).sort_by("id"))
