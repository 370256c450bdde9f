"""Batches and objects shipped inline or spilled read back the same."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from nmtpipe.transforms.formats.batch_transport import (
    SpillRef,
    inline,
    pairs_table,
    receive_object,
    rejects_table,
    ship,
    ship_object,
    side_input,
    spill,
)
from nmtpipe.transforms.text.records import (
    PAIRS_SCHEMA,
    REJECTS_SCHEMA,
    Reject,
    pair_batch,
    reject_batch,
)


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


def test_ship_spills_a_chunk_into_one_file_or_inlines_it(tmp_path):
    batches = {
        (0, 1): reject_batch([Reject("o", 5, "empty", "src empty after normalisation", b"", b"x")]),
        (0, 0): reject_batch(
            [Reject("o", 2, "copy", "target is a copy of the source", b"a", b"a")]
        ),
    }
    spilled = list(ship(batches, str(tmp_path / "r.arrow")))
    inlined = list(ship(batches, None))
    assert [k for k, _ in spilled] == [k for k, _ in inlined] == [(0, 0), (0, 1)]
    assert {ref.url for _, ref in spilled} == {str(tmp_path / "r.arrow")}
    table = rejects_table(item for _, item in reversed(spilled))
    assert table.equals(rejects_table(item for _, item in inlined))
    assert table.column("line").to_pylist() == [2, 5]
    assert rejects_table([]).schema == REJECTS_SCHEMA
    assert list(ship({}, str(tmp_path / "none.arrow"))) == []


def test_an_object_goes_inline_or_as_a_file_a_side_input_read_once_per_process(tmp_path):
    value = {"keys": pa.array(["a", "b"]), "n": 2}
    assert ship_object(value, None) is value
    assert receive_object(value) is value and side_input(value) is value
    ref = ship_object(value, str(tmp_path / "spill"))
    assert isinstance(ref, SpillRef) and ref.url.startswith(str(tmp_path / "spill"))
    assert ship_object(value, str(tmp_path / "spill")) != ref  # a file per shipping
    received = receive_object(ref)
    assert received["n"] == 2 and received["keys"].equals(value["keys"])
    first = side_input(ref)
    assert side_input(ref) is first
    Path(ref.url).unlink()
    assert side_input(ref) is first  # not read again
