"""Keeping splits apart: exact duplicates across splits and shared sides with test pairs."""

from __future__ import annotations

import pickle

import pyarrow as pa

from nmtpipe.transforms.text.overlap import Protected, side_keys
from nmtpipe.transforms.text.records import PAIRS_SCHEMA


def table(origin: str, rows: list[tuple[int, str, str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "src": s, "tgt": t, "origin": origin, "line": n}
         for n, (i, s, t) in enumerate(rows, start=1)],
        schema=PAIRS_SCHEMA,
    )  # fmt: skip


def test_keys_ignore_case_and_the_punctuation_at_the_ends():
    keys = side_keys(pa.array(["I'll do it.", "i'll do it!", "「你好。」", "...", "a, b"]))
    assert keys.to_pylist() == ["i'll do it", "i'll do it", "你好", "", "a, b"]


def test_train_and_valid_pairs_sharing_a_side_with_a_higher_split_go():
    protected = Protected.of_batch("test", table("test", [(1, "Good morning.", "早上好。")]))
    protected.merge(Protected.of_batch("valid", table("valid", [(2, "Thanks!", "谢谢！")])))
    train = table("train", [
        (1, "Good morning.", "早上好。"),  # the test pair itself
        (3, "good morning", "早安。"),  # its source
        (4, "Hello.", "早上好"),  # its target
        (5, "Thanks.", "多谢。"),  # the valid pair's source
        (6, "Bye.", "再见。"),
    ])  # fmt: skip
    gone, rejects = protected.exclude(train, "train", keep_overlap=False)
    assert gone.tolist() == [True, True, True, True, False]
    assert [(r["line"], r["reason"], r["detail"]) for r in rejects.to_pylist()] == [
        (1, "duplicate", "same pair as test pair test:1"),
        (2, "overlap", "src is also the src of test pair test:1"),
        (3, "overlap", "tgt is also the tgt of test pair test:1"),
        (4, "overlap", "src is also the src of valid pair valid:1"),
    ]
    # Valid pairs answer to test pairs only; test pairs to nobody.
    gone, _ = protected.exclude(table("valid", [(7, "Thanks!", "谢谢！")]), "valid", False)
    assert gone.tolist() == [False]
    assert not protected.exclude(train, "test", False)[0].any()


def test_keep_overlap_still_removes_exact_duplicates():
    protected = Protected.of_batch("test", table("test", [(1, "Good morning.", "早上好。")]))
    train = table("train", [(1, "Good morning.", "早上好。"), (3, "Good morning.", "早安。")])
    gone, rejects = protected.exclude(train, "train", keep_overlap=True)
    assert gone.tolist() == [True, False] and rejects["reason"].to_pylist() == ["duplicate"]


def test_a_key_from_several_pairs_names_the_first_location_in_line_order():
    """Merged from batches in any order, and compared by line number (line 9 before 10)."""
    later = Protected.of_batch("test", table("t", [(1, "Good morning.", "早上好。")] * 10))
    earlier = Protected.of_batch("test", table("t", [(1, "Good morning.", "早上好。")] * 9))
    protected = Protected().merge(later).merge(earlier)
    protected = pickle.loads(pickle.dumps(protected.compact()))  # as a side input ships
    assert [t.num_rows for t in protected.found["test", "id"]] == [1]
    _, rejects = protected.exclude(
        table("train", [(1, "Good morning.", "早上好。")]), "train", False
    )
    assert rejects["detail"][0].as_py() == "same pair as test pair t:1"
    only_tenth = Protected.of_batch(
        "test", table("t", [(2, "Other.", "别的。")] * 8 + [(1, "Good morning.", "早上好。")] * 2)
    )
    protected = only_tenth.merge(Protected.of_batch("test", table("u", [(1, "Hi.", "嗨。")])))
    _, rejects = protected.exclude(table("train", [(5, "good morning", "早安")]), "train", False)
    assert rejects["detail"][0].as_py() == "src is also the src of test pair t:9"
