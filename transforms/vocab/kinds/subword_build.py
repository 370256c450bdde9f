"""Build Tensor2Tensor's SubwordTextEncoder vocabulary, fast, with T2T's exact result.

T2T's `build_from_token_counts(min_count, num_iterations=4)` repeats: segment every
escaped token greedily with the current vocabulary; count every substring that starts
at a subtoken boundary (up to `max_subtoken_length - 1` characters, or to the token's
end), weighted by the token's count; then accept substrings longest first whose count,
less what accepted longer substrings starting with them already took, reaches
`min_count`. `build_to_target_size` bisects on `min_count`, building from scratch
each time: about ten builds of four iterations, in pure Python.

Here every substring that can ever be counted is interned once (`SubstringTable`): a
row per (position, length) and an id per distinct string, numbered by length so that
each length is a contiguous block of ids. Interning is exact and needs no Python
strings: the id of a string of length L is the rank of the pair (id of its first L - 1
characters, its last character) among the length-L rows, one `np.unique` per length.
With that, each iteration is array arithmetic:

- counting is a `bincount` of the ids whose start position is a boundary; iteration 0's
  counts (every position is a boundary) do not depend on `min_count` and are shared by
  all bisection steps;
- longest-match segmentation is a `maximum.reduceat` over the lengths of the rows that
  are in the vocabulary, and the boundaries follow by pointer jumping, all tokens at once;
- "less what longer strings took" is a sum pushed from children to parents, one length
  at a time, longest first.

Only the final ordering (count, then string, both descending) is T2T's Python sort.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from nmtpipe.transforms.vocab.kinds.subword import (
    RESERVED_TOKENS,
    alphabet_of,
    check_reserved,
    escape_token,
)


class SubstringTable:
    """Every substring T2T may count, for a fixed set of escaped tokens.

    Row r is the substring of `text` starting at `pos[r]` with `length[r]` characters;
    rows are grouped by start position, shortest first. `sid[r]` interns the string:
    ids of length-L strings are `level_start[L] <= id < level_start[L + 1]`, and
    `parent[i]` is the id of string i without its last character (-1 for one character).
    """

    def __init__(self, escaped: Sequence[str], max_subtoken_length: int | None) -> None:
        self.text = "".join(escaped)
        sizes = np.fromiter(map(len, escaped), dtype=np.int64, count=len(escaped))
        self.token_start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.token_end = self.token_start + sizes
        n = len(self.text)
        # A substring may run to its token's end, and (T2T's off-by-one) only to
        # max_subtoken_length - 1 characters when a maximum is given.
        token_of = np.repeat(np.arange(len(escaped)), sizes)
        room = self.token_end[token_of] - np.arange(n)
        if max_subtoken_length is not None:
            room = np.minimum(room, max(max_subtoken_length - 1, 0))
        self.rows_at = room  # rows starting at each position
        self.token_at = token_of
        # Row and position indices are the bulk of the memory: 32 bits while they fit.
        index = np.int32 if max(n, int(room.sum())) < 2**31 else np.int64
        self.pos = np.repeat(np.arange(n, dtype=index), room)
        group = np.concatenate([[0], np.cumsum(room)[:-1]]).astype(np.int64)
        self.group_start = group  # first row of each position (valid where room > 0)
        self.length = (np.arange(self.pos.size, dtype=index) - np.repeat(group, room) + 1).astype(
            np.int32
        )
        self._intern(index)

    def _intern(self, index: type[np.integer]) -> None:
        """Number the rows' strings, length by length (see the module docstring)."""
        chars = np.frombuffer(self.text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        by_length = np.argsort(self.length, kind="stable")
        ends = np.searchsorted(self.length[by_length], np.arange(1, self.length.max(initial=0) + 2))
        self.sid = np.empty(self.pos.size, dtype=index)
        self.level_start = [0, 0]  # no strings of length 0
        parents, firsts = [], []
        for length, (lo, hi) in enumerate(itertools.pairwise(ends.tolist()), start=1):
            rows = by_length[lo:hi]
            last = chars[self.pos[rows] + length - 1]
            prefix = self.sid[rows - 1].astype(np.int64) if length > 1 else -1
            keys = (prefix + 1) * (1 << 21) + last  # code points are < 2**21
            unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            self.sid[rows] = self.level_start[-1] + inverse
            self.level_start.append(self.level_start[-1] + unique.size)
            parents.append((unique >> 21) - 1)
            firsts.append(rows[first])
        self.parent = np.concatenate(parents) if parents else np.zeros(0, dtype=np.int64)
        self.strings_at = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)
        self.num_strings = self.parent.size

    def id_of(self, string: str) -> int | None:
        """The id of a string, or None if no token contains it within the length limit."""
        at = self.text.find(string)
        while at >= 0:
            if len(string) <= self.rows_at[at]:
                return int(self.sid[self.group_start[at] + len(string) - 1])
            at = self.text.find(string, at + 1)
        return None

    def strings(self, ids: np.ndarray) -> list[str]:
        """The strings of many ids."""
        rows = self.strings_at[ids]
        starts, lengths = self.pos[rows].tolist(), self.length[rows].tolist()
        return [self.text[p : p + n] for p, n in zip(starts, lengths, strict=True)]

    def counts(self, weights: np.ndarray, boundary: np.ndarray | None) -> np.ndarray:
        """Per-string count of rows starting at a boundary, each weighted by its token."""
        at_position = weights[self.token_at]
        rows = slice(None) if boundary is None else boundary[self.pos]
        totals = np.bincount(
            self.sid[rows], weights=at_position[self.pos[rows]], minlength=self.num_strings
        )
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

    def boundaries(self, in_vocab: np.ndarray, longest_extra: np.ndarray) -> np.ndarray:
        """Start positions of T2T's greedy longest-match segmentation of every token.

        `longest_extra` is the length of a vocabulary string starting at each position
        that is not a row of the table (a reserved token longer than the counting limit).
        """
        reach = np.where(in_vocab[self.sid], self.length, 0)
        has_rows = self.rows_at > 0
        # Every single character is in the vocabulary (T2T adds the whole alphabet).
        longest = np.maximum(longest_extra, 1)
        if reach.size:
            longest[has_rows] = np.maximum(
                longest[has_rows], np.maximum.reduceat(reach, self.group_start[has_rows])
            )
        boundary = np.zeros(self.rows_at.size, dtype=bool)
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
    """Builds T2T vocabularies for one set of token counts (and reuses the work)."""

    def __init__(
        self,
        token_counts: Mapping[str, int],
        max_subtoken_length: int | None = None,
        reserved_tokens: Sequence[str] = RESERVED_TOKENS,
    ) -> None:
        check_reserved(reserved_tokens)
        self.reserved = tuple(reserved_tokens)
        tokens = list(token_counts)
        self.alphabet = alphabet_of([*tokens, *self.reserved])
        escaped = [escape_token(t, self.alphabet) for t in tokens]
        self.table = SubstringTable(escaped, max_subtoken_length)
        self.weights = np.fromiter(token_counts.values(), dtype=np.float64, count=len(tokens))
        self.escaped_reserved = [escape_token(t, self.alphabet) for t in self.reserved]
        # Alphabet characters that occur in the tokens, by string id; the rest count 0.
        char_ids = {c: self.table.id_of(c) for c in self.alphabet}
        self.char_ids = {c: i for c, i in char_ids.items() if i is not None}
        reserved_ids = [self.table.id_of(s) for s in self.escaped_reserved]
        self._always = np.zeros(self.table.num_strings, dtype=bool)
        self._always[[*self.char_ids.values(), *(i for i in reserved_ids if i is not None)]] = True
        # Reserved tokens are always in the vocabulary and may match inside a token even
        # where the table, limited to max_subtoken_length - 1 characters, has no row.
        self._reserved_reach = np.zeros(self.table.rows_at.size, dtype=np.int64)
        for s in self.escaped_reserved:
            at = self.table.occurrences(s)
            self._reserved_reach[at] = np.maximum(self._reserved_reach[at], len(s))
        self._first_counts: np.ndarray | None = None
        # Each length's block of ids, longest first, with its parents' offsets in the
        # next (one shorter) block.
        starts = self.table.level_start
        self._levels = [
            (slice(lo, hi), self.table.parent[lo:hi] - starts[length - 1])
            for length, (lo, hi) in reversed(list(enumerate(itertools.pairwise(starts))))
            if hi > lo
        ]

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

    def _vocabulary(self, accepted: np.ndarray, left: np.ndarray) -> list[str]:
        """The accepted strings and the whole alphabet, by count then string, descending,
        after the reserved tokens: T2T's list, in T2T's order."""
        starts = self.table.level_start
        first_multi = starts[min(2, len(starts) - 1)]  # ids of strings longer than 1
        multi = np.flatnonzero(accepted[first_multi:]) + first_multi
        candidates = list(zip(left[multi].tolist(), self.table.strings(multi), strict=True))
        candidates += [
            (int(left[self.char_ids[c]]) if c in self.char_ids else 0, c) for c in self.alphabet
        ]
        candidates.sort(reverse=True)
        return self.escaped_reserved + [s for _, s in candidates]

    def build(self, min_count: int, num_iterations: int = 4) -> list[str]:
        """T2T's `build_from_token_counts`: the vocabulary's subtoken strings, by id."""
        min_count = max(min_count, 1)
        if self._first_counts is None:
            self._first_counts = self.table.counts(self.weights, None)
        counts = self._first_counts
        for _ in range(num_iterations - 1):
            accepted, _ = self._select(counts, min_count)
            # Only which strings are in the vocabulary matters for the next segmentation.
            boundary = self.table.boundaries(accepted | self._always, self._reserved_reach)
            counts = self.table.counts(self.weights, boundary)
        return self._vocabulary(*self._select(counts, min_count))

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
