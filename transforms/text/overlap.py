"""Keeping the splits apart: no pair in two splits, no test sentence in training data.

A pair is kept in the first split of `PRIORITY` that holds it: an exact duplicate of a
test pair is dropped from valid and train (`duplicate`), and so is one of a valid pair
from train. Besides, no train or valid pair may share its source or its target with a
test pair, and no train pair with a valid pair (`overlap`): a model that has seen a
test sentence in training scores well on it for the wrong reason. Sides are compared by
their *overlap key*: the normalised text, lower-cased, without the spaces and
punctuation at its ends ("I'll do it." and "i'll do it!" are one sentence; empty keys
never match).

Valid and test sets are a small share of the data, so their ids and keys (`Protected`)
travel to every shard writer as a side input, with where each came from for the
rejects' detail; training data is never held whole. The look-ups are Arrow hash joins
(`index_in`).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.text.filters import DUPLICATE, OVERLAP
from nmtpipe.transforms.text.records import REJECTS_SCHEMA, locations, reject_rows

PRIORITY = ("test", "valid", "train")
FIELDS = ("id", "src", "tgt")
_COLUMNS = ["key", "line", "origin"]
# Trimmed from both ends of a side's key: ASCII and common CJK/typographic punctuation
# and spaces.
_TRIM = string.punctuation + string.whitespace + "。，、！？：；「」『』（）《》〈〉“”‘’…—·．～"


def side_keys(texts: pa.Array) -> pa.Array:
    """The overlap keys of normalised texts (vectorised, no Python string per row)."""
    return pc.utf8_trim(pc.utf8_lower(texts), characters=_TRIM)


def _first_per_key(parts: list[pa.Table]) -> pa.Table:
    """One row per key, the one of the smallest (origin, line), sorted by key; origins
    dictionary-encoded (a few inputs for many rows)."""
    plain = [t.set_column(2, "origin", t["origin"].cast(pa.string())) for t in parts]
    order = [(name, "ascending") for name in ("key", "origin", "line")]
    table = pa.concat_tables(plain).combine_chunks().sort_by(order)
    keys = table["key"].combine_chunks()
    first = np.ones(len(keys), dtype=bool)
    if len(keys) > 1:
        first[1:] = pc.not_equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
    table = table.filter(pa.array(first))
    return table.set_column(2, "origin", pc.dictionary_encode(table["origin"]))


@dataclass
class Protected:
    """Ids and side keys of the pairs of the splits that outrank train, with where each
    came from: (split, field) → Arrow tables of `key` (the id, or the side key), `line`
    and `origin` (the smallest location, where a key came from several pairs).

    Held as Arrow columns, not Python objects: the valid and test sets are a share of the
    corpus, so this grows with it (about 80 bytes a key instead of 250). A batch's keys
    and merges are appended as they come (`unsorted` names those slots); `compact()`
    leaves one table with one row per key, before the set is used or shipped.
    """

    found: dict[tuple[str, str], list[pa.Table]] = field(default_factory=dict)
    unsorted: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def of_batch(cls, split: str, batch: pa.RecordBatch | pa.Table) -> Protected:
        """What the pairs of `batch`, of split `split`, protect."""
        out = cls()
        for name in FIELDS:
            keys = batch["id"] if name == "id" else side_keys(batch[name])
            table = pa.table([keys, batch["line"], batch["origin"]], names=_COLUMNS)
            if name != "id":  # an empty key never matches
                table = table.filter(pc.not_equal(table["key"], ""))
            out.found[(split, name)] = [table]
            out.unsorted.add((split, name))
        return out

    def merge(self, other: Protected) -> Protected:
        for slot, tables in other.found.items():
            self.found.setdefault(slot, []).extend(tables)
            self.unsorted.add(slot)
        return self

    def compact(self) -> Protected:
        """One table with one row per key in every slot."""
        for slot in self.unsorted:
            self.found[slot] = [_first_per_key(self.found[slot])]
        self.unsorted.clear()
        return self

    def keys(self, name: str) -> list[pa.ChunkedArray]:
        """The keys of field `name` (`id`, `src` or `tgt`), one array per split held."""
        self.compact()
        return [tables[0]["key"] for (_, field_), tables in self.found.items() if field_ == name]

    def exclude(
        self, table: pa.Table, split: str, keep_overlap: bool
    ) -> tuple[np.ndarray, pa.Table]:
        """Which rows of `table` (pairs of `split`) must go, and their rejects (in
        REJECTS_SCHEMA, in row order)."""
        n = table.num_rows
        gone = np.zeros(n, dtype=bool)
        found: list[tuple[np.ndarray, pa.Table]] = []
        if n == 0:
            return gone, REJECTS_SCHEMA.empty_table()
        self.compact()
        keys = {"id": table["id"], "src": side_keys(table["src"]), "tgt": side_keys(table["tgt"])}
        for higher in PRIORITY[: PRIORITY.index(split)]:
            checks = [("id", DUPLICATE)]
            if not keep_overlap:
                checks += [("src", OVERLAP), ("tgt", OVERLAP)]
            for name, reason in checks:
                tables = self.found.get((higher, name))
                if not tables or tables[0].num_rows == 0:
                    continue
                protected = tables[0]
                where = pc.index_in(keys[name], value_set=protected["key"].combine_chunks())
                where = pc.fill_null(where, -1).to_numpy(zero_copy_only=False)
                rows = np.flatnonzero((where >= 0) & ~gone)
                if rows.size == 0:
                    continue
                hits = pa.array(where[rows])
                origin = protected["origin"].take(hits).cast(pa.string())
                place = locations(origin, protected["line"].take(hits))
                what = "same pair as" if name == "id" else f"{name} is also the {name} of"
                detail = pc.binary_join_element_wise(f"{what} {higher} pair ", place, "")
                found.append((rows, reject_rows(table, rows, reason, detail)))
                gone[rows] = True
        if not found:
            return gone, REJECTS_SCHEMA.empty_table()
        order = np.argsort(np.concatenate([rows for rows, _ in found]), kind="stable")
        return gone, pa.concat_tables([t for _, t in found]).take(pa.array(order))
