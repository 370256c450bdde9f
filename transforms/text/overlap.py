"""Keeping the splits apart: no pair in two splits, no test sentence in training data.

A pair is kept in the first split of `PRIORITY` that holds it: an exact duplicate of a
test pair is dropped from valid and train (`duplicate`), and so is one of a valid pair
from train. Besides, no train or valid pair may share its source or its target with a
test pair, and no train pair with a valid pair (`overlap`): a model that has seen a
test sentence in training scores well on it for the wrong reason. Sides are compared by
their *overlap key*: the normalised text, lower-cased, without the spaces and
punctuation at its ends ("I'll do it." and "i'll do it!" are one sentence; empty keys
never match).

Valid and test sets are small, so their ids and keys (`Protected`) travel to every
shard writer as a side input, with where each came from for the rejects' detail;
training data is never held whole. The look-ups are Arrow hash joins (`is_in`).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.text.filters import DUPLICATE, OVERLAP
from nmtpipe.transforms.text.records import Reject

PRIORITY = ("test", "valid", "train")
FIELDS = ("id", "src", "tgt")
# Trimmed from both ends of a side's key: ASCII and common CJK/typographic punctuation
# and spaces.
_TRIM = string.punctuation + string.whitespace + "。，、！？：；「」『』（）《》〈〉“”‘’…—·．～"


def side_keys(texts: pa.Array) -> pa.Array:
    """The overlap keys of normalised texts (vectorised, no Python string per row)."""
    return pc.utf8_trim(pc.utf8_lower(texts), characters=_TRIM)


@dataclass
class Protected:
    """Ids and side keys of the pairs of the splits that outrank train: (split, field)
    → {id or key: "origin:line" of the pair it came from (the smallest, if several)}."""

    found: dict[tuple[str, str], dict] = field(default_factory=dict)

    @classmethod
    def of_batch(cls, split: str, batch: pa.RecordBatch | pa.Table) -> Protected:
        """What the pairs of `batch`, of split `split`, protect."""
        origins, lines = batch["origin"].to_pylist(), batch["line"].to_pylist()
        where = [f"{o}:{n}" for o, n in zip(origins, lines, strict=True)]
        out = cls()
        for name in FIELDS:
            values = batch["id"] if name == "id" else side_keys(batch[name])
            found = out.found.setdefault((split, name), {})
            for value, loc in zip(values.to_pylist(), where, strict=True):
                if value != "" and (value not in found or loc < found[value]):
                    found[value] = loc
        return out

    def merge(self, other: Protected) -> Protected:
        for slot, values in other.found.items():
            mine = self.found.setdefault(slot, {})
            for value, loc in values.items():
                if value not in mine or loc < mine[value]:
                    mine[value] = loc
        return self

    def exclude(
        self, table: pa.Table, split: str, keep_overlap: bool
    ) -> tuple[np.ndarray, list[Reject]]:
        """Which rows of `table` (pairs of `split`) must go, and their rejects, in row
        order."""
        n = table.num_rows
        gone = np.zeros(n, dtype=bool)
        found: list[tuple[int, Reject]] = []
        if n == 0:
            return gone, []
        keys = {"id": table["id"], "src": side_keys(table["src"]), "tgt": side_keys(table["tgt"])}
        for higher in PRIORITY[: PRIORITY.index(split)]:
            checks = [("id", DUPLICATE)]
            if not keep_overlap:
                checks += [("src", OVERLAP), ("tgt", OVERLAP)]
            for name, reason in checks:
                values = self.found.get((higher, name))
                if not values:
                    continue
                hit = pc.is_in(keys[name], value_set=pa.array(list(values), keys[name].type))
                rows = np.flatnonzero(hit.to_numpy(zero_copy_only=False) & ~gone)
                for i in rows.tolist():
                    loc = values[keys[name][i].as_py()]
                    detail = (
                        f"same pair as {higher} pair {loc}"
                        if name == "id"
                        else f"{name} is also the {name} of {higher} pair {loc}"
                    )
                    found.append((i, row_reject(table, i, reason, detail)))
                gone[rows] = True
        return gone, [reject for _, reject in sorted(found, key=lambda f: f[0])]


def row_reject(table: pa.Table, i: int, reason: str, detail: str) -> Reject:
    """Row `i` of a pairs table as a reject (its normalised text as the bytes)."""
    return Reject(
        table["origin"][i].as_py(),
        table["line"][i].as_py(),
        reason,
        detail,
        table["src"][i].as_py().encode(),
        table["tgt"][i].as_py().encode(),
    )
