"""Build Tensor2Tensor's SubwordTextEncoder vocabulary, fast, with T2T's exact result.

T2T's `build_from_token_counts(min_count, num_iterations=4)` repeats: segment every
escaped token greedily with the current vocabulary; count every substring that starts
at a subtoken boundary (up to `max_subtoken_length - 1` characters, or to the token's
end), weighted by the token's count; then accept substrings longest first whose count,
less what accepted longer substrings starting with them already took, reaches
`min_count`. `build_to_target_size` bisects on `min_count`, building from scratch
each time: about ten builds of four iterations, in pure Python.

Here the substrings that can matter are interned once (`SubstringTable`), with no
Python string per substring, and each iteration is array arithmetic:

- a substring's *plain count* (every occurrence, at any position, weighted) bounds its
  count in every iteration, since boundaries only remove occurrences. One whose plain
  count is below `min_count` is never accepted and never starts a longer accepted one,
  so the table keeps only substrings at or above a floor: level by level, the strings of
  length L whose prefix and suffix of length L - 1 are kept (each occurs wherever the
  string does), their counts first bounded by a count-min sketch so that only the few
  it does not rule out are tallied. On real text most long substrings occur once, and
  the table holds a few rows per character instead of one per (character, length);
- the first iteration's counts are the plain counts (every position is a boundary) and
  do not depend on `min_count`;
- longest-match segmentation takes, per position, the longest kept string in the
  vocabulary, and the boundaries follow by pointer jumping, all tokens at once;
- "less what longer strings took" is a sum pushed from children to parents, one length
  at a time, longest first.

Every count is a sum over tokens, so the tokens are visited a chunk at a time
(`token_chunks.py`): the strings and their counts are the table's, the rows (where each
string occurs) are the chunk's, and a chunk's share is added to the totals. A build with
a `min_count` below the table's floor builds a new table first. Only the final ordering
(count, then string, both descending) is T2T's Python sort.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.vocab.kinds.subword import (
    RESERVED_TOKENS,
    alphabet_of,
    check_reserved,
    escape_token,
)
from nmtpipe.transforms.vocab.kinds.token_chunks import Chunk, TokenChunks

_CHAR_BITS = 21  # code points are < 2**21
_CHAR_MASK = (1 << _CHAR_BITS) - 1
# Distinct candidate strings of one length summed over chunks before they are merged.
_MERGE_ROWS = 1 << 22
# The sketch that bounds candidates' counts before they are tallied: two rows of at most
# 2**21 buckets (32 MB), each bucket the sum of the counts of the keys hashed to it.
_SKETCH_BITS = 21
_SKETCH_MULTIPLIERS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


class Rows(NamedTuple):
    """Rows of one length: their start positions, string ids and tokens' weights."""

    length: int
    pos: np.ndarray
    sid: np.ndarray
    weight: np.ndarray


class SubstringTable:
    """The substrings of the escaped tokens of `chunks` that T2T may count and whose
    plain count is at least `floor`.

    The strings are numbered by length: those of length L have the ids
    `level_start[L] <= id < level_start[L + 1]`, in the order of their keys
    `keys[L]` (the id of the string without its last character within its level,
    shifted, or-ed with that character's code point); `parent[i]` is the id of string i
    without its last character (-1 for one character) and `plain[i]` its plain count.
    `char_counts` holds every character's plain count, kept in the table or not.
    Where each string occurs is kept per chunk (`rows{L}.pos`, `rows{L}.sid`).

    The characters of `always` are kept whatever their count: those of the reserved
    tokens, which segmentation may match inside a token however rare they are.
    """

    def __init__(
        self,
        chunks: TokenChunks,
        max_subtoken_length: int | None,
        floor: float,
        always: str = "",
    ) -> None:
        self.floor = floor
        self.chunks = chunks
        self.keys: list[np.ndarray] = [np.zeros(0, np.int64)]  # level 0: none
        self.level_start = [0, 0]
        parents: list[np.ndarray] = []
        plains: list[np.ndarray] = []
        self.char_counts: dict[str, int] = {}
        forced_chars = np.array(sorted({ord(c) for c in always}), np.int64)
        self._always_chars = np.zeros(0, np.int64)
        for _ in chunks.map(lambda i, chunk: self._start(i, chunk, max_subtoken_length)):
            pass
        bits = min(_SKETCH_BITS, max(chunks.size.bit_length(), 4))
        length = 1
        while True:
            # Longer strings' candidates are many more than the kept ones (5.3M of length
            # 3 on 4M long-tail pairs), and their tally would grow with the corpus: a
            # sketch's bound (never below a true count) drops most first.
            sketch = self._sketch(length, bits) if length > 1 else None
            tally = _Tally()
            for sums in chunks.map(functools.partial(self._sums, length=length, sketch=sketch)):
                tally.add(sums)
            unique, plain = tally.result()
            if not unique.size:
                break
            order = np.argsort(unique)
            unique, plain = unique[order], plain[order]
            kept = plain >= floor
            if length == 1:
                as_text = unique.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
                counted = np.rint(plain).astype(np.int64).tolist()
                self.char_counts = dict(zip(as_text, counted, strict=True))
                forced = np.isin(unique, forced_chars)
                kept |= forced
                self._always_chars = np.flatnonzero(forced[kept])
            level_keys = unique[kept]
            start = self.level_start[-1]
            self.keys.append(level_keys)
            self.level_start.append(start + level_keys.size)
            prefix = level_keys >> _CHAR_BITS
            parents.append(prefix + self.level_start[-3] if length > 1 else prefix - 1)
            plains.append(plain[kept])
            del tally, unique, plain, kept
            for _ in chunks.map(functools.partial(self._place, length=length, start=start)):
                pass
            length += 1
        self.parent = np.concatenate(parents) if parents else np.zeros(0, np.int64)
        self.plain = np.concatenate(plains) if plains else np.zeros(0)
        self.num_strings = self.level_start[-1]
        self._last_char = np.concatenate(self.keys) & _CHAR_MASK
        pa.default_memory_pool().release_unused()  # what interning took, for the builds

    def _start(self, i: int, chunk: Chunk, max_subtoken_length: int | None) -> None:
        """Chunk `i`'s room at each position, and every position as the first front."""
        room = chunk.room(max_subtoken_length).astype(_index(chunk))
        self.chunks.put(i, "room", room)
        at = np.flatnonzero(room >= 1).astype(room.dtype)
        self.chunks.put(i, "front.pos", at)
        self.chunks.put(i, "front.prefix", np.zeros(at.size, np.int32))

    def _sketch(self, length: int, bits: int) -> np.ndarray:
        """A count-min sketch of the candidates of `length` characters: per hash, the
        sum of the plain counts of the candidates in each bucket."""

        def one(i: int, chunk: Chunk) -> np.ndarray:
            at, keys = self._candidates(i, chunk, length)
            weight = chunk.weight_at[at]
            return np.stack([np.bincount(b, weight, 1 << bits) for b in _buckets(keys, bits)])

        sketch = np.zeros((len(_SKETCH_MULTIPLIERS), 1 << bits))
        for part in self.chunks.map(one):
            sketch += part
        return sketch

    def _sums(self, i: int, chunk: Chunk, length: int, sketch: np.ndarray | None) -> pa.Table:
        """Chunk `i`'s plain count of each candidate string of `length` characters (those
        the `sketch` does not rule out)."""
        at, keys = self._candidates(i, chunk, length)
        if sketch is not None:
            buckets = _buckets(keys, sketch.shape[1].bit_length() - 1)
            bound = np.minimum(*(row[b] for row, b in zip(sketch, buckets, strict=True)))
            ok = bound >= self.floor
            at, keys = at[ok], keys[ok]
        return _sums(pa.table({"key": keys, "weight": chunk.weight_at[at]}))

    def _candidates(self, i: int, chunk: Chunk, length: int) -> tuple[np.ndarray, np.ndarray]:
        """Chunk `i`'s positions that may start a kept string of `length` characters, and
        the strings' keys there: its prefix is kept (the front) and so is its suffix
        (both are counted wherever it is, so neither counts less)."""
        at = self.chunks.get(i, "front.pos")
        prefix = self.chunks.get(i, "front.prefix")
        if length > 1:
            starts = np.zeros(chunk.chars.size, dtype=bool)
            starts[self.chunks.get(i, f"rows{length - 1}.pos")] = True
            ok = starts[at + 1]
            at, prefix = at[ok], prefix[ok]
        keys = (prefix.astype(np.int64) << _CHAR_BITS) | chunk.chars[at + (length - 1)]
        return at, keys

    def _place(self, i: int, chunk: Chunk, length: int, start: int) -> None:
        """Chunk `i`'s rows of `length` characters, and the front of the next length."""
        at, keys = self._candidates(i, chunk, length)
        found = pc.index_in(pa.array(keys), value_set=pa.array(self.keys[length]))
        local = pc.fill_null(found, -1).to_numpy()
        hit = local >= 0
        pos, local = at[hit], local[hit].astype(np.int32)
        self.chunks.put(i, f"rows{length}.pos", pos)
        self.chunks.put(i, f"rows{length}.sid", local + np.int32(start))
        longer = self.chunks.get(i, "room")[pos] > length
        self.chunks.put(i, "front.pos", pos[longer])
        self.chunks.put(i, "front.prefix", local[longer])

    @property
    def levels(self) -> int:
        """The longest kept length."""
        return len(self.keys) - 1

    def char_ids(self) -> dict[str, int]:
        """The ids of the kept characters."""
        ids = np.arange(self.level_start[1], self.level_start[min(2, len(self.level_start) - 1)])
        return dict(zip(self.strings(ids), ids.tolist(), strict=True))

    def id_of(self, string: str) -> int | None:
        """The id of a kept string, or None."""
        if not 0 < len(string) <= self.levels:
            return None
        local = 0
        for length, c in enumerate(string, 1):
            level = self.keys[length]
            key = (local << _CHAR_BITS) | ord(c)
            local = int(np.searchsorted(level, key))
            if local == level.size or level[local] != key:
                return None
        return self.level_start[len(string)] + local

    def strings(self, ids: np.ndarray) -> list[str]:
        """The strings of many ids."""
        ids = np.asarray(ids, dtype=np.int64)
        lengths = np.searchsorted(self.level_start, ids, side="right") - 1
        width = int(lengths.max()) if ids.size else 0
        points = np.zeros((ids.size, width), np.uint32)
        at = ids.copy()
        for back in range(width):  # last characters first, walking up the parents
            live = at >= 0
            points[live, lengths[live] - 1 - back] = self._last_char[at[live]]
            at[live] = self.parent[at[live]]
        text = points[np.arange(width) < lengths[:, None]].tobytes()
        joined = text.decode("utf-32-le", "surrogatepass")
        ends = np.cumsum(lengths)
        return [joined[a:b] for a, b in zip((ends - lengths).tolist(), ends.tolist(), strict=True)]

    def active(self, min_count: int) -> np.ndarray:
        """Which strings a build with `min_count` needs: those counted at least
        `min_count` times in all, and the reserved tokens' characters; the others are
        never accepted nor segmented by."""
        active = self.plain >= min_count
        active[self.level_start[1] + self._always_chars] = True
        return active

    def rows_of(self, i: int, chunk: Chunk, active: np.ndarray, first: int = 1) -> ChunkRows:
        """Chunk `i`'s rows of the `active` strings, level by level from length `first`,
        with where the reserved tokens occur."""
        rows = []
        for length in range(first, self.levels + 1):
            sid = self.chunks.get(i, f"rows{length}.sid")
            on = active[sid]
            pos = self.chunks.get(i, f"rows{length}.pos")[on]
            rows.append(Rows(length, pos, sid[on], chunk.weight_at[pos]))
        extra = (self.chunks.get(i, "reach.at"), self.chunks.get(i, "reach.length"))
        return ChunkRows(chunk, rows, extra, self.level_start)


@dataclass
class ChunkRows:
    """One chunk's rows of the strings a build needs: what segmenting and counting its
    tokens takes."""

    chunk: Chunk
    rows: list[Rows]
    extra: tuple[np.ndarray, np.ndarray]  # positions and lengths of rowless strings
    level_start: list[int]

    def longest(self, in_vocab: np.ndarray) -> np.ndarray:
        """At each position, the length of the longest string of the rows in the
        vocabulary that starts there (every character is in it: at least 1), or of a
        rowless vocabulary string (reserved tokens longer than the counting limit)."""
        longest = np.ones(self.chunk.chars.size, dtype=_index(self.chunk))
        for r in self.rows:
            if r.length > 1:
                longest[r.pos[in_vocab[r.sid]]] = r.length
        at, lengths = self.extra
        np.maximum.at(longest, at, lengths.astype(longest.dtype))
        return longest

    def boundaries(self, longest: np.ndarray) -> np.ndarray:
        """Start positions of T2T's greedy longest-match segmentation of every token,
        by pointer jumping over all tokens at once."""
        boundary = np.zeros(self.chunk.chars.size, dtype=bool)
        at, end = self.chunk.token_start, self.chunk.token_end
        live = at < end
        at, end = at[live], end[live]
        while at.size:
            boundary[at] = True
            at = at + longest[at]
            live = at < end
            at, end = at[live], end[live]
        return boundary

    def add_counts(self, boundary: np.ndarray, totals: np.ndarray) -> None:
        """Add to `totals` the count of each string of the rows that starts at a
        boundary, weighted by its token."""
        for r in self.rows:
            at = boundary[r.pos]
            lo, hi = self.level_start[r.length], self.level_start[r.length + 1]
            totals[lo:hi] += np.bincount(r.sid[at] - lo, weights=r.weight[at], minlength=hi - lo)


class _Tally:
    """Weighted counts of int64 keys, added a chunk's sums per key at a time, merged
    when they add up to `_MERGE_ROWS` rows."""

    def __init__(self) -> None:
        self._parts: list[pa.Table] = []
        self._rows = 0

    def add(self, sums: pa.Table) -> None:
        """Add a chunk's sums (`_sums`)."""
        if sums.num_rows:
            self._parts.append(sums)
            self._rows += sums.num_rows
        if self._rows > _MERGE_ROWS:
            self._parts = [_sums(pa.concat_tables(self._parts))]
            self._rows = self._parts[0].num_rows

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct keys, in no particular order, and each one's total."""
        if not self._parts:
            return np.zeros(0, np.int64), np.zeros(0)
        table = _sums(pa.concat_tables(self._parts)) if len(self._parts) > 1 else self._parts[0]
        return table["key"].to_numpy(), table["weight"].to_numpy()


def _sums(table: pa.Table) -> pa.Table:
    """The `weight` summed per `key`."""
    summed = table.group_by("key", use_threads=False).aggregate([("weight", "sum")])
    return summed.rename_columns(["key", "weight"])


def _buckets(keys: np.ndarray, bits: int) -> list[np.ndarray]:
    """The keys' buckets in each row of a sketch of `2**bits` buckets (multiplicative
    hashing: the top bits of the key times an odd constant)."""
    shift = np.uint64(64 - bits)
    as_unsigned = keys.astype(np.uint64)
    return [((as_unsigned * m) >> shift).astype(np.intp) for m in _SKETCH_MULTIPLIERS]


def _index(chunk: Chunk) -> type[np.integer]:
    """The integer type of positions in `chunk`."""
    return np.int32 if chunk.chars.size < 2**31 else np.int64


@dataclass
class BuildTrace:
    """Each min_count tried by the bisection and the vocabulary size it gave, and the
    min_count of the vocabulary returned."""

    steps: list[tuple[int, int]] = field(default_factory=list)
    chosen: int = 0


class SubwordBuilder:
    """Builds T2T vocabularies for one set of token counts (and reuses the work): a
    mapping of tokens to counts, or batches of tokens (Arrow strings) and their counts,
    read once. The tokens are held `max_characters` at a time (`token_chunks.py`)."""

    # A table made for min_count m serves builds down to m / FLOOR_SPAN: bisection steps
    # halve from 500, a new table costs about as much as a few builds, and a lower floor
    # keeps more rows (measured: benchmarks/RESULTS.md).
    FLOOR_SPAN = 8
    # Peak memory of a build per character of a chunk of escaped tokens, at most
    # (measured on news-like text: benchmarks/RESULTS.md).
    BYTES_PER_CHARACTER = 150

    def __init__(
        self,
        token_counts: Mapping[str, int] | Iterable[tuple[pa.Array, np.ndarray]],
        max_subtoken_length: int | None = None,
        reserved_tokens: Sequence[str] = RESERVED_TOKENS,
        characters: str = "",
        max_characters: int = 0,
        threads: int = 1,
        spill: str | None = None,
    ) -> None:
        """`characters`: more characters for the alphabet than the tokens have;
        `max_characters`: the most characters of tokens held at once (0: all), by
        `threads` threads (a chunk each), the others on local disk under `spill`
        (default: TMPDIR)."""
        check_reserved(reserved_tokens)
        if isinstance(token_counts, Mapping):
            tokens = pa.array(list(token_counts), pa.string())
            counts = np.fromiter(token_counts.values(), np.float64, len(token_counts))
            token_counts = [(tokens, counts)]
        self.chunks = TokenChunks(token_counts, max_characters, threads, spill)
        self.reserved = tuple(reserved_tokens)
        self.alphabet = alphabet_of([*self.reserved, characters, self.chunks.characters])
        self.chunks.escape(self.alphabet)
        self._max_subtoken_length = max_subtoken_length
        self.escaped_reserved = [escape_token(t, self.alphabet) for t in self.reserved]
        # Reserved tokens are always in the vocabulary and may match inside a token even
        # where a table, limited to max_subtoken_length - 1 characters, has no row.
        for i, chunk in self.chunks:
            found = [(chunk.occurrences(s), len(s)) for s in self.escaped_reserved]
            self.chunks.put(i, "reach.at", np.concatenate([at for at, _ in found]))
            lengths = [np.full(at.size, n, dtype=np.int64) for at, n in found]
            self.chunks.put(i, "reach.length", np.concatenate(lengths))
        self.table: SubstringTable | None = None

    def __enter__(self) -> SubwordBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.chunks.close()

    def _table_for(self, min_count: int) -> SubstringTable:
        """A table whose floor is at most `min_count`, made anew when the last one's is
        higher."""
        if self.table is not None and self.table.floor <= min_count:
            return self.table
        self.table = None  # one table in memory at a time
        table = SubstringTable(
            self.chunks,
            self._max_subtoken_length,
            max(1, min_count // self.FLOOR_SPAN),
            "".join(self.escaped_reserved),
        )
        self._char_ids = table.char_ids()
        reserved_ids = [table.id_of(s) for s in self.escaped_reserved]
        self._always = np.zeros(table.num_strings, dtype=bool)
        self._always[[*self._char_ids.values(), *(i for i in reserved_ids if i is not None)]] = True
        # Each length's block of ids, longest first, with its parents' offsets in the
        # next (one shorter) block.
        starts = table.level_start
        self._levels = [
            (slice(lo, hi), table.parent[lo:hi] - starts[length - 1])
            for length, (lo, hi) in reversed(list(enumerate(itertools.pairwise(starts))))
            if hi > lo
        ]
        self.table = table
        return table

    def _counter(self, active: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
        """`count(in_vocab, first)`: each string's count (those of `active` strings of
        length `first` or more) at the boundaries of segmenting every token with the
        strings `in_vocab`. Rows are read anew from disk each time, or kept where one
        chunk in memory holds every token."""
        table = self.table
        assert table is not None
        kept: dict[int, ChunkRows] = {}

        def rows_of(i: int, chunk: Chunk, first: int) -> ChunkRows:
            if self.chunks.spilled:
                return table.rows_of(i, chunk, active, first)
            if i not in kept:
                kept[i] = table.rows_of(i, chunk, active)
            return dataclasses.replace(kept[i], rows=kept[i].rows[first - 1 :])

        def count(in_vocab: np.ndarray, first: int) -> np.ndarray:
            def one(i: int, chunk: Chunk) -> np.ndarray:
                rows = rows_of(i, chunk, first)
                totals = np.zeros(table.num_strings)
                rows.add_counts(rows.boundaries(rows.longest(in_vocab)), totals)
                return totals

            return np.rint(sum(self.chunks.map(one))).astype(np.int64)

        return count

    def _select(self, counts: np.ndarray, min_count: int) -> tuple[np.ndarray, np.ndarray]:
        """T2T's candidate selection: which string ids are accepted, and their counts.

        Longest strings first; a string is accepted when its count less what accepted
        longer strings starting with it took reaches `min_count`, and then it takes its
        own remaining count from every shorter prefix.
        """
        accepted = np.zeros(counts.size, dtype=bool)
        left_all = np.empty_like(counts)
        taken: np.ndarray | int = 0
        for k, (ids, parents) in enumerate(self._levels):
            left = counts[ids] - taken
            ok = left >= min_count
            accepted[ids] = ok
            left_all[ids] = left
            if k + 1 < len(self._levels):
                push = np.where(ok, left, 0) + taken
                size = self._levels[k + 1][0].stop - self._levels[k + 1][0].start
                taken = np.rint(np.bincount(parents, weights=push, minlength=size)).astype(np.int64)
        return accepted, left_all

    def _vocabulary(self, accepted: np.ndarray, left: np.ndarray, active: np.ndarray) -> list[str]:
        """The accepted strings and the whole alphabet, by count then string, descending,
        after the reserved tokens: T2T's list, in T2T's order. A character counted fewer
        than `min_count` times in all (not `active`) never takes part in a longer
        accepted string, so every occurrence of it is a boundary: its count is its
        plain count."""
        table = self.table
        starts = table.level_start
        first_multi = starts[min(2, len(starts) - 1)]  # ids of strings longer than 1
        multi = np.flatnonzero(accepted[first_multi:]) + first_multi
        candidates = list(zip(left[multi].tolist(), table.strings(multi), strict=True))
        counted = {c: int(left[i]) for c, i in self._char_ids.items() if active[i]}
        candidates += [(counted.get(c, table.char_counts.get(c, 0)), c) for c in self.alphabet]
        candidates.sort(reverse=True)
        return self.escaped_reserved + [s for _, s in candidates]

    def build(self, min_count: int, num_iterations: int = 4) -> list[str]:
        """T2T's `build_from_token_counts`: the vocabulary's subtoken strings, by id."""
        min_count = max(min_count, 1)
        table = self._table_for(min_count)
        active = table.active(min_count)
        count = self._counter(active)
        counts = np.rint(table.plain).astype(np.int64)
        for k in range(num_iterations - 1):
            accepted, _ = self._select(counts, min_count)
            # Only which strings are in the vocabulary matters for the next segmentation.
            # Characters are in it whatever their counts, which matter only to the order
            # of the last iteration's list: before, only longer strings are counted.
            counts = count(accepted | self._always, 1 if k == num_iterations - 2 else 2)
        return self._vocabulary(*self._select(counts, min_count), active)

    def subtoken_counts(self, vocab: Sequence[str]) -> np.ndarray:
        """How often each subtoken of `vocab` (a list this builder built) is used when
        every token is encoded with it, weighted by the token's count: fairseq's
        dictionary counts."""
        table = self.table
        assert table is not None
        index = {s: i for i, s in enumerate(vocab)}
        multi = np.arange(table.level_start[min(2, len(table.level_start) - 1)], table.num_strings)
        in_vocab = np.zeros(table.num_strings, dtype=bool)
        vocab_of = np.full(table.num_strings, -1, dtype=np.int64)
        for i, string in zip(multi.tolist(), table.strings(multi), strict=True):
            if string in index:
                in_vocab[i], vocab_of[i] = True, index[string]
        rowless = [s for s in self.escaped_reserved if table.id_of(s) is None]

        def one(i: int, chunk: Chunk) -> np.ndarray:
            rows = table.rows_of(i, chunk, in_vocab, first=2)
            longest = rows.longest(in_vocab)
            boundary = rows.boundaries(longest)
            totals = np.zeros(len(vocab))
            for r in rows.rows:
                used = boundary[r.pos] & (longest[r.pos] == r.length)
                np.add.at(totals, vocab_of[r.sid[used]], r.weight[used])
            for string in rowless:
                at = chunk.occurrences(string)
                used = boundary[at] & (longest[at] == len(string))
                totals[index[string]] += chunk.weight_at[at[used]].sum()
            single = np.flatnonzero(boundary & (longest == 1))
            points = chunk.chars[single]
            chars = np.unique(points)
            sums = np.bincount(np.searchsorted(chars, points), weights=chunk.weight_at[single])
            as_text = chars.tobytes().decode("utf-32-le", "surrogatepass")
            for c, n in zip(as_text, sums.tolist(), strict=True):
                totals[index[c]] += n
            return totals

        return np.rint(sum(self.chunks.map(one))).astype(np.int64)

    def build_to_target_size(
        self,
        target_size: int,
        min_val: int = 1,
        max_val: int = 1000,
        on_build: Callable[[int, int], None] = lambda min_count, size: None,
    ) -> tuple[list[str], BuildTrace]:
        """T2T's `build_to_target_size`: bisect on min_count until within 1% of the
        target, else return the closest size found, exactly as T2T does. `on_build`
        hears of each build (its min_count and size), for a progress display."""
        if min_val > max_val:
            raise ValueError("lower bound for the minimum token count is above the upper bound")
        if target_size < 1:
            raise ValueError("target size must be positive")
        trace = BuildTrace()

        def bisect(lo: int, hi: int) -> tuple[list[str], int]:
            present = (lo + hi) // 2
            vocab = self.build(present)
            trace.steps.append((present, len(vocab)))
            on_build(present, len(vocab))
            if abs(len(vocab) - target_size) * 100 < target_size or lo >= hi or present < 2:
                return vocab, present
            other = bisect(present + 1, hi) if len(vocab) > target_size else bisect(lo, present - 1)
            if abs(len(other[0]) - target_size) < abs(len(vocab) - target_size):
                return other
            return vocab, present

        vocab, trace.chosen = bisect(min_val, max_val)
        return vocab, trace
