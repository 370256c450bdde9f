"""Pair batches inline and spilled read back the same."""

from __future__ import annotations

import pyarrow as pa

from transforms.records import PAIRS_SCHEMA, inline, pair_batch, pairs_table, spill


def test_inline_and_spilled_batches_give_the_same_table(tmp_path):
    batches = [
        pair_batch("o1", pa.array([1, 2]), ["a", "b"], ["A", "B"], pa.array([1, 2])),
        pair_batch("o2", pa.array([3]), ["c"], ["C"], pa.array([7])),
    ]
    refs = spill(str(tmp_path / "chunk.arrow"), batches)
    inline_table = pairs_table([inline(b) for b in batches])
    assert pairs_table(refs).equals(inline_table)
    assert inline_table.schema == PAIRS_SCHEMA
    assert inline_table.column("origin").to_pylist() == ["o1", "o1", "o2"]
    assert pairs_table([refs[1]]).column("line").to_pylist() == [7]
    assert pairs_table([]).schema == PAIRS_SCHEMA
