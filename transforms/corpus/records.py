"""Records of a table as a chunk of raw pairs: each side's texts joined by `\\n`, as the
cleaner takes lines.

A text field may hold a line break, which the chunk's `\\n` joins cannot: it becomes a
space (a translation pair is one line on each side in every file nmtpipe writes). A null
is an empty side, which the cleaner rejects as `empty`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.corpus.fields import Tree
from nmtpipe.transforms.corpus.inputs import CorpusInput
from nmtpipe.transforms.corpus.raw_corpus import RawChunk, Unread
from nmtpipe.transforms.storage.encodings import UTF8


def schema_tree(schema: pa.Schema | pa.StructType) -> Tree:
    """An Arrow schema as `fields.Tree`: each field's type name, or its struct's fields."""
    tree: dict[str, Tree | str] = {}
    for field in schema:
        kind = field.type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        tree[field.name] = schema_tree(kind) if pa.types.is_struct(kind) else str(kind)
    return tree


def column_of(batch: pa.RecordBatch | pa.Table, path: str) -> pa.Array | pa.ChunkedArray:
    """The column a dotted path names: a column named with the dots, else struct fields
    (a null struct gives nulls)."""
    names = batch.schema.names
    if path in names:
        return batch.column(path)
    head, _, rest = path.partition(".")
    node = batch.column(head)
    while rest:
        kind = node.type
        for name in _field_names(kind):
            if rest == name or rest.startswith(name + "."):
                node = pc.struct_field(node, [kind.get_field_index(name)])
                rest = rest[len(name) + 1 :]
                break
        else:
            raise KeyError(path)
    return node


def _field_names(kind: pa.StructType) -> list[str]:
    """A struct's field names, longest first (a name holding a dot wins over a prefix)."""
    return sorted((kind.field(i).name for i in range(kind.num_fields)), key=len, reverse=True)


def text_blob(column: pa.Array | pa.ChunkedArray) -> bytes:
    """A column of texts as one `\\n`-joined UTF-8 blob (line breaks as spaces, nulls
    empty)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    column = column.cast(pa.large_string())
    if len(column) == 0:
        return b""
    column = pc.replace_substring(column, "\n", " ").fill_null("")
    offsets = pa.array([0, len(column)], pa.int64())
    newline = pa.scalar("\n", pa.large_string())
    joined = pc.binary_join(pa.LargeListArray.from_arrays(offsets, column), newline)[0]
    return joined.as_buffer().to_pybytes()


def table_chunk(
    inp: CorpusInput,
    first: int,
    records: pa.RecordBatch | pa.Table,
    fields: tuple[str, str],
    unread: tuple[Unread, ...] = (),
) -> RawChunk:
    """Records `first`, `first + 1`, ... of table `inp` as a chunk, their two `fields`
    as the sides."""
    src, tgt = (text_blob(column_of(records, path)) for path in fields)
    return RawChunk(inp.origin, inp.role, first, src, tgt, inp.columns, (UTF8, UTF8), unread)


def tree_of_value(value: Mapping) -> Tree:
    """A JSON object's shape as `fields.Tree` (Python type names at the leaves)."""
    return {
        str(k): tree_of_value(v) if isinstance(v, Mapping) else type(v).__name__
        for k, v in value.items()
    }
