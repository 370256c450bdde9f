"""Arrow IPC streams and files planned as ranges of record batches from their headers:
the same records as Arrow's own reader gives, whatever the batches, the format, the
compression or the chunk's size; dictionaries streamed whole; broken files named."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.corpus import registry
from nmtpipe.transforms.corpus.readers import arrow_messages
from nmtpipe.transforms.corpus.readers.arrow_files import ArrowRef
from nmtpipe.transforms.corpus.tables import resolve_tables
from nmtpipe.transforms.errors import InputError
from tests.helpers import shared_lines

EN = shared_lines("tatoeba-cmn", "en")[:300]
ZH = shared_lines("tatoeba-cmn", "zh")[:300]
LANGS = ("en", "zh")


def write(
    path: Path, batch_sizes: list[int], *, file: bool = False, compression: str | None = None
) -> list[tuple[int, str, str]]:
    """A table of pairs in batches of `batch_sizes` rows (an empty one included where
    given), with a column that is not read; the records it holds."""
    pair = pa.struct([("en", pa.string()), ("zh", pa.string())])
    schema = pa.schema([("id", pa.int64()), ("translation", pair)])
    options = pa.ipc.IpcWriteOptions(compression=compression)
    new = pa.ipc.new_file if file else pa.ipc.new_stream
    row = 0
    with new(str(path), schema, options=options) as writer:
        for size in batch_sizes:
            rows = range(row, row + size)
            pairs = [{"en": EN[i % len(EN)], "zh": ZH[i % len(ZH)]} for i in rows]
            columns = [pa.array(list(rows)), pa.array(pairs)]
            writer.write_batch(pa.record_batch(columns, schema=schema))
            row += size
    return [(i + 1, EN[i % len(EN)], ZH[i % len(ZH)]) for i in range(row)]


def records(url: str, chunk_lines: int) -> list[tuple[int, str, str]]:
    (inp,) = resolve_tables(url, "train", LANGS)
    out = []
    for planned in registry.plan(inp, chunk_lines):
        for chunk in registry.load(planned):
            assert chunk.src.count(b"\n") < chunk_lines  # no chunk longer than asked
            sides = chunk.src.decode().split("\n"), chunk.tgt.decode().split("\n")
            out += [(chunk.first_line + i, *p) for i, p in enumerate(zip(*sides, strict=True))]
    return out


@settings(max_examples=40, deadline=None)
@given(
    batch_sizes=st.lists(st.integers(0, 40), min_size=1, max_size=12),
    chunk_lines=st.integers(1, 60),
    file=st.booleans(),
    compression=st.sampled_from([None, "lz4", "zstd"]),
)
def test_ranges_give_arrow_s_own_records(tmp_path_factory, batch_sizes, chunk_lines, file,
                                         compression):  # fmt: skip
    path = tmp_path_factory.mktemp("arrow") / "t.arrow"
    expected = write(path, batch_sizes, file=file, compression=compression)
    (inp,) = resolve_tables(str(path), "train", LANGS)
    assert all(isinstance(p.part, ArrowRef) for p in registry.plan(inp, chunk_lines))
    assert records(str(path), chunk_lines) == expected
    with open(path, "rb") as f:
        found = [m.rows for m in arrow_messages.messages(f, path.stat().st_size, str(path))]
    assert found[1:] == batch_sizes  # the schema, then every batch's rows from its header


def test_runs_hold_about_a_chunk_and_a_large_batch_is_its_own(tmp_path: Path):
    write(tmp_path / "t.arrow", [4, 4, 4, 25, 3, 3])
    (inp,) = resolve_tables(str(tmp_path / "t.arrow"), "train", LANGS)
    refs = [p.part for p in registry.plan(inp, 10)]
    assert [(r.batches.rows, r.first_row) for r in refs] == [(12, 1), (25, 13), (6, 38)]
    assert [c.first_line for c in registry.load(registry.plan(inp, 10).__next__())] == [1, 11]


def test_a_saved_dataset_is_read_in_ranges_by_the_workers(tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    expected = [(i + 1, EN[i % len(EN)], ZH[i % len(ZH)]) for i in range(2500)]
    rows = [{"en": e, "zh": z} for _, e, z in expected]
    datasets.Dataset.from_dict({"translation": rows}).save_to_disk(str(tmp_path / "saved"))
    (inp,) = resolve_tables(str(tmp_path / "saved"), "train", LANGS)
    assert registry.reader(inp.reader).whole(inp) is None
    planned = [p.part for p in registry.plan(inp, 1000)]  # its batches of 1,000 rows
    assert [(r.first_row, r.batches.rows) for r in planned] == [(1, 1000), (1001, 1000),
                                                                (2001, 500)]  # fmt: skip
    assert records(str(tmp_path / "saved"), 1000) == expected


def test_dictionary_columns_are_streamed_by_one_worker(tmp_path: Path):
    table = pa.table({"en": pa.array(EN[:30]).dictionary_encode(), "zh": ZH[:30]})
    with pa.ipc.new_stream(str(tmp_path / "d.arrow"), table.schema) as writer:
        writer.write_table(table, max_chunksize=7)
    (inp,) = resolve_tables(str(tmp_path / "d.arrow"), "train", LANGS)
    assert registry.reader(inp.reader).whole(inp) == "dictionary-encoded columns (en)"
    assert not any(isinstance(p.part, ArrowRef) for p in registry.plan(inp, 10))
    assert records(str(tmp_path / "d.arrow"), 10) == [
        (i + 1, e, z) for i, (e, z) in enumerate(zip(EN[:30], ZH[:30], strict=True))
    ]


def test_a_cut_or_broken_stream_is_named(tmp_path: Path):
    path = tmp_path / "t.arrow"
    write(path, [20, 20, 20])
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 100])
    (inp,) = resolve_tables(str(path), "train", LANGS)
    with pytest.raises(InputError, match=r"t\.arrow: the Arrow message at byte \d+ runs past"):
        list(registry.plan(inp, 10))
    size = len(whole)
    with pytest.raises(InputError, match=r"x\.arrow: not an Arrow IPC message at byte 0"):
        list(arrow_messages.messages(io.BytesIO(b"\x01\x00"), size, "x.arrow"))
    schema_only = io.BytesIO(arrow_messages.END_OF_STREAM)
    with pytest.raises(InputError, match="starts with its schema"):
        arrow_messages.schema_range(arrow_messages.messages(schema_only, 8, "y.arrow"), "y.arrow")


def test_ranges_of_a_stream_on_s3(tmp_path: Path, s3: str):
    import s3fs

    expected = write(tmp_path / "t.arrow", [9] * 7, compression="zstd")
    s3fs.S3FileSystem().put_file(str(tmp_path / "t.arrow"), f"{s3}/t.arrow")
    assert records(f"{s3}/t.arrow", 20) == expected
