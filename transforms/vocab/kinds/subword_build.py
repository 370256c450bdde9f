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
  length L extended from the kept strings of length L - 1 (a prefix occurs wherever its
  extensions do). On real text most long substrings occur once, and the table holds a
  few rows per character instead of one per (character, length);
- the first iteration's counts are the plain counts (every position is a boundary) and
  do not depend on `min_count`;
- longest-match segmentation takes, per position, the longest kept string in the
  vocabulary, and the boundaries follow by pointer jumping, all tokens at once;
- "less what longer strings took" is a sum pushed from children to parents, one length
  at a time, longest first.

A build with a `min_count` below the table's floor builds a new table first. Only the
final ordering (count, then string, both descending) is T2T's Python sort.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.text.records import utf8_text
from nmtpipe.transforms.vocab.kinds.subword import (
    RESERVED_TOKENS,
    alphabet_of,
    check_reserved,
    escape_token,
)

_CHAR_BITS = 21  # code points are < 2**21


class Rows(NamedTuple):
    """Rows of one length: their start positions, string ids and tokens' weights."""

    length: int
    pos: np.ndarray
    sid: np.ndarray
    weight: np.ndarray


class SubstringTable:
    """The substrings of a fixed set of escaped tokens that T2T may count and whose plain
    count is at least `floor`.

    Level L (from 1) holds their rows of length L: `pos[L]`, the start positions in
    `text` (ascending), and `sid[L]`, the string ids. The ids of length-L strings are
    `level_start[L] <= id < level_start[L + 1]`; `parent[i]` is the id of string i
    without its last character (-1 for one character) and `plain[i]` its plain count.
    `char_counts` holds every character's plain count, kept in the table or not.

    The characters of `always` are kept whatever their count: those of the reserved
    tokens, which segmentation may match inside a token however rare they are.
    """

    def __init__(
        self,
        text: str,
        sizes: np.ndarray,
        weights: np.ndarray,
        max_subtoken_length: int | None,
        floor: float,
        always: str = "",
    ) -> None:
        """`text`: the escaped tokens, concatenated; `sizes`: the length of each;
        `weights`: the count of each."""
        self.floor = floor
        self.text = text
        self.token_end = np.cumsum(sizes, dtype=np.int64)
        self.token_start = self.token_end - sizes
        n = len(self.text)
        self.index = np.int32 if n < 2**31 else np.int64
        # A substring may run to its token's end, and (T2T's off-by-one) only to
        # max_subtoken_length - 1 characters when a maximum is given.
        room = _room(self.token_end, sizes, self.index)
        if max_subtoken_length is not None:
            np.minimum(room, max(max_subtoken_length - 1, 0), out=room)
        self.weight_at = np.repeat(weights, sizes)
        chars = np.frombuffer(self.text.encode("utf-32-le"), dtype=np.uint32)
        self.pos: list[np.ndarray] = [np.zeros(0, self.index)]  # level 0: none
        self.sid: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.level_start = [0, 0]
        parents: list[np.ndarray] = []
        plains: list[np.ndarray] = []
        self.char_counts: dict[str, int] = {}
        self._always_chars: np.ndarray = np.zeros(0, np.int64)
        firsts: list[np.ndarray] = []
        at = np.flatnonzero(room >= 1).astype(self.index)
        prefix = np.zeros(at.size, np.int32)  # the kept prefix's id within its level
        length = 1
        while at.size:
            keys = (prefix.astype(np.int64) << _CHAR_BITS) | chars[at + (length - 1)]
            # interned by hashing (Arrow), several times faster than sorting: ids in
            # the order strings first occur, which nothing depends on
            encoded = pc.dictionary_encode(pa.array(keys))
            unique = encoded.dictionary.to_numpy()
            inverse = encoded.indices.to_numpy()
            plain = np.bincount(inverse, weights=self.weight_at[at], minlength=unique.size)
            kept = plain >= floor
            if length == 1:
                as_text = unique.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
                counted = np.rint(plain).astype(np.int64).tolist()
                self.char_counts = dict(zip(as_text, counted, strict=True))
                forced = np.isin(unique, [ord(c) for c in set(always)])
                kept |= forced
            # ids are numbered as strings first occur: each new one is one more than
            # the largest before it
            first = np.flatnonzero(np.diff(np.maximum.accumulate(inverse), prepend=-1) > 0)
            firsts.append(at[first][kept])
            local = (np.cumsum(kept) - 1).astype(np.int32)
            rows = kept[inverse]
            at, ids = at[rows], local[inverse[rows]]
            del keys, encoded, inverse, rows
            start = self.level_start[-1]
            self.pos.append(at)
            self.sid.append(ids + np.int32(start))
            self.level_start.append(start + int(np.count_nonzero(kept)))
            parent = unique[kept] >> _CHAR_BITS
            parents.append(parent + self.level_start[-3] if length > 1 else parent - 1)
            plains.append(plain[kept])
            if length == 1:
                self._always_chars = np.flatnonzero(forced[kept])
            longer = room[at] > length
            at, prefix = at[longer], ids[longer]
            length += 1
        self.parent = np.concatenate(parents) if parents else np.zeros(0, np.int64)
        self.plain = np.concatenate(plains) if plains else np.zeros(0)
        pa.default_memory_pool().release_unused()  # what interning took, for the builds
        self.num_strings = self.level_start[-1]
        self._string_pos = np.concatenate([np.zeros(0, np.int64), *firsts]).astype(np.int64)

    @property
    def levels(self) -> int:
        """The longest kept length."""
        return len(self.pos) - 1

    def char_ids(self) -> dict[str, int]:
        """The ids of the kept characters."""
        ids = np.arange(self.level_start[1], self.level_start[min(2, len(self.level_start) - 1)])
        return dict(zip(self.strings(ids), ids.tolist(), strict=True))

    def id_of(self, string: str) -> int | None:
        """The id of a kept string, or None."""
        length = len(string)
        if not 0 < length <= self.levels:
            return None
        pos = self.pos[length]
        at = self.text.find(string)
        while at >= 0:
            k = int(np.searchsorted(pos, at))
            if k < pos.size and pos[k] == at:
                return int(self.sid[length][k])
            at = self.text.find(string, at + 1)
        return None

    def strings(self, ids: np.ndarray) -> list[str]:
        """The strings of many ids."""
        lengths = np.searchsorted(self.level_start, ids, side="right") - 1
        starts = self._string_pos[ids]
        return [
            self.text[p : p + n] for p, n in zip(starts.tolist(), lengths.tolist(), strict=True)
        ]

    def active(self, min_count: int) -> np.ndarray:
        """Which strings a build with `min_count` needs: those counted at least
        `min_count` times in all, and the reserved tokens' characters; the others are
        never accepted nor segmented by."""
        active = self.plain >= min_count
        active[self.level_start[1] + self._always_chars] = True
        return active

    def rows(self, active: np.ndarray) -> list[Rows]:
        """The rows of the `active` strings, level by level."""
        out = []
        for length in range(1, self.levels + 1):
            on = active[self.sid[length]]
            pos = self.pos[length][on]
            out.append(Rows(length, pos, self.sid[length][on], self.weight_at[pos]))
        return out

    def counts(self, boundary: np.ndarray, rows: list[Rows]) -> np.ndarray:
        """Per-string count of `rows` starting at a boundary, each weighted by its token
        (0 for the strings of other rows)."""
        totals = np.zeros(self.num_strings)
        for r in rows:
            at = boundary[r.pos]
            lo, hi = self.level_start[r.length], self.level_start[r.length + 1]
            totals[lo:hi] = np.bincount(r.sid[at] - lo, weights=r.weight[at], minlength=hi - lo)
        return np.rint(totals).astype(np.int64)

    def occurrences(self, needle: str) -> np.ndarray:
        """Positions where `needle` occurs inside one token."""
        found, at = [], self.text.find(needle)
        while at >= 0:
            found.append(at)
            at = self.text.find(needle, at + 1)
        starts = np.asarray(found, dtype=np.int64)
        token = np.searchsorted(self.token_end, starts, side="right")
        return starts[starts + len(needle) <= self.token_end[token]]

    def longest(
        self, in_vocab: np.ndarray, extra: tuple[np.ndarray, np.ndarray], rows: list[Rows]
    ) -> np.ndarray:
        """At each position, the length of the longest string of `rows` in the
        vocabulary that starts there (every character is in it: at least 1).

        `extra`: positions and lengths of vocabulary strings that are no rows of the
        table (reserved tokens longer than the counting limit)."""
        longest = np.ones(len(self.text), dtype=self.index)
        for r in rows:
            if r.length > 1:
                longest[r.pos[in_vocab[r.sid]]] = r.length
        at, lengths = extra
        np.maximum.at(longest, at, lengths.astype(self.index))
        return longest

    def boundaries(self, longest: np.ndarray) -> np.ndarray:
        """Start positions of T2T's greedy longest-match segmentation of every token,
        by pointer jumping over all tokens at once."""
        boundary = np.zeros(len(self.text), dtype=bool)
        at, end = self.token_start, self.token_end
        live = at < end
        at, end = at[live], end[live]
        while at.size:
            boundary[at] = True
            at = at + longest[at]
            live = at < end
            at, end = at[live], end[live]
        return boundary


@dataclass
class BuildTrace:
    """Each min_count tried by the bisection and the vocabulary size it gave, and the
    min_count of the vocabulary returned."""

    steps: list[tuple[int, int]] = field(default_factory=list)
    chosen: int = 0


class SubwordBuilder:
    """Builds T2T vocabularies for one set of token counts (and reuses the work): a
    mapping of tokens to counts, or tokens as Arrow strings with their counts."""

    # A table made for min_count m serves builds down to m / FLOOR_SPAN: bisection steps
    # halve from 500, a new table costs about as much as a few builds, and a lower floor
    # keeps more rows (measured: benchmarks/RESULTS.md).
    FLOOR_SPAN = 4
    # Peak memory of a build per character of the escaped tokens, at most (measured on
    # news-like text: benchmarks/RESULTS.md), what `token_sample` budgets.
    BYTES_PER_CHARACTER = 150

    def __init__(
        self,
        token_counts: Mapping[str, int] | tuple[pa.Array, np.ndarray],
        max_subtoken_length: int | None = None,
        reserved_tokens: Sequence[str] = RESERVED_TOKENS,
        characters: str = "",
    ) -> None:
        """`characters`: more characters for the alphabet than the tokens have (those of
        the tokens a sample of the counts left out)."""
        check_reserved(reserved_tokens)
        if isinstance(token_counts, Mapping):
            tokens = pa.array(list(token_counts), pa.string())
            counts = np.fromiter(token_counts.values(), np.float64, len(token_counts))
        else:
            tokens, counts = token_counts
        self.reserved = tuple(reserved_tokens)
        self.alphabet = alphabet_of([*self.reserved, characters, _characters(tokens)])
        self._text, self._sizes = escaped_text(tokens, self.alphabet)
        self._weights = np.asarray(counts, dtype=np.float64)
        self._max_subtoken_length = max_subtoken_length
        self.escaped_reserved = [escape_token(t, self.alphabet) for t in self.reserved]
        self.table: SubstringTable | None = None

    def _table_for(self, min_count: int) -> SubstringTable:
        """A table whose floor is at most `min_count`, made anew when the last one's is
        higher."""
        if self.table is not None and self.table.floor <= min_count:
            return self.table
        self.table = None  # one table in memory at a time
        table = SubstringTable(
            self._text,
            self._sizes,
            self._weights,
            self._max_subtoken_length,
            max(1, min_count // self.FLOOR_SPAN),
            "".join(self.escaped_reserved),
        )
        self._char_ids = table.char_ids()
        reserved_ids = [table.id_of(s) for s in self.escaped_reserved]
        self._always = np.zeros(table.num_strings, dtype=bool)
        self._always[[*self._char_ids.values(), *(i for i in reserved_ids if i is not None)]] = True
        # Reserved tokens are always in the vocabulary and may match inside a token even
        # where the table, limited to max_subtoken_length - 1 characters, has no row.
        found = [(table.occurrences(s), len(s)) for s in self.escaped_reserved]
        self._reserved_reach = (
            np.concatenate([at for at, _ in found]),
            np.concatenate([np.full(at.size, n) for at, n in found]),
        )
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
        rows = table.rows(active)
        counts = np.rint(table.plain).astype(np.int64)
        for k in range(num_iterations - 1):
            accepted, _ = self._select(counts, min_count)
            # Only which strings are in the vocabulary matters for the next segmentation.
            longest = table.longest(accepted | self._always, self._reserved_reach, rows)
            boundary = table.boundaries(longest)
            # Characters are in the vocabulary whatever their counts, which matter only
            # to the order of the last iteration's list.
            counts = table.counts(boundary, rows if k == num_iterations - 2 else rows[1:])
        return self._vocabulary(*self._select(counts, min_count), active)

    def subtoken_counts(self, vocab: Sequence[str]) -> np.ndarray:
        """How often each subtoken of `vocab` (a list this builder built) is used when
        every token is encoded with it, weighted by the token's count: fairseq's
        dictionary counts."""
        table = self.table
        index = {s: i for i, s in enumerate(vocab)}
        multi = np.arange(table.level_start[min(2, len(table.level_start) - 1)], table.num_strings)
        in_vocab = np.zeros(table.num_strings, dtype=bool)
        vocab_of = np.full(table.num_strings, -1, dtype=np.int64)
        for i, string in zip(multi.tolist(), table.strings(multi), strict=True):
            if string in index:
                in_vocab[i], vocab_of[i] = True, index[string]
        rows = table.rows(in_vocab)
        longest = table.longest(in_vocab, self._reserved_reach, rows)
        boundary = table.boundaries(longest)
        totals = np.zeros(len(vocab))
        for r in rows[1:]:
            used = boundary[r.pos] & (longest[r.pos] == r.length)
            np.add.at(totals, vocab_of[r.sid[used]], r.weight[used])
        for string in self.escaped_reserved:  # those no row stands for
            if table.id_of(string) is None:
                at = table.occurrences(string)
                used = boundary[at] & (longest[at] == len(string))
                totals[index[string]] += table.weight_at[at[used]].sum()
        single = np.flatnonzero(boundary & (longest == 1))
        points = np.frombuffer(self._text.encode("utf-32-le"), np.uint32)[single]
        chars = np.unique(points)
        sums = np.bincount(np.searchsorted(chars, points), weights=table.weight_at[single])
        as_text = chars.tobytes().decode("utf-32-le", "surrogatepass")
        for c, n in zip(as_text, sums.tolist(), strict=True):
            totals[index[c]] += n
        return np.rint(totals).astype(np.int64)

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


def _characters(tokens: pa.Array) -> str:
    """Every character of `tokens`, once each (in code-point order)."""
    if len(tokens) == 0:
        return ""
    points = np.frombuffer(utf8_text(tokens).encode("utf-32-le", "surrogatepass"), np.uint32)
    return np.unique(points).tobytes().decode("utf-32-le", "surrogatepass")


def escaped_text(tokens: pa.Array, alphabet: Collection[str]) -> tuple[str, np.ndarray]:
    """The tokens escaped as T2T escapes them, concatenated, and each one's length.

    Most tokens need only their closing `_`: those with a backslash, an underscore or a
    line break (or, with a smaller alphabet, a character outside it) go through
    `escape_token` one by one."""
    tokens = tokens.cast(pa.string())
    special = pc.match_substring_regex(tokens, r"[\\_\n]").to_numpy(zero_copy_only=False)
    outside = set(_characters(tokens)) - set(alphabet)
    if outside:
        special |= pc.match_substring_regex(
            tokens, "[" + "".join(f"\\x{{{ord(c):x}}}" for c in outside) + "]"
        ).to_numpy(zero_copy_only=False)
    where = np.flatnonzero(special)
    if where.size:
        bodies = [escape_token(t, alphabet)[:-1] for t in tokens.take(pa.array(where)).to_pylist()]
        mask = np.zeros(len(tokens), dtype=bool)
        mask[where] = True
        tokens = pc.replace_with_mask(tokens, pa.array(mask), pa.array(bodies, pa.string()))
    escaped = pc.binary_join_element_wise(tokens, "_", "")
    sizes = pc.utf8_length(escaped).to_numpy(zero_copy_only=False).astype(np.int64)
    return (utf8_text(escaped) if len(escaped) else ""), sizes


def _room(ends: np.ndarray, sizes: np.ndarray, index: type[np.integer]) -> np.ndarray:
    """Characters from each position to its token's end (its own included)."""
    return np.repeat(ends.astype(index), sizes) - np.arange(int(sizes.sum()), dtype=index)
