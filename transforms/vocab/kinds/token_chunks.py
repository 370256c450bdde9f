"""The escaped tokens a T2T vocabulary is built from, in chunks of at most a given number
of characters: the driver holds one chunk at a time, whatever the corpus.

Real text has nearly one distinct Chinese token per clause, so the tokens alone grow
with the corpus. T2T's counts are sums over tokens (each token's segmentation is its
own), so a build can visit the tokens a chunk at a time and add up what each gives:
the result is exactly T2T's. Where one chunk holds every token it stays in memory;
otherwise each chunk, and the arrays a build keeps per chunk, wait in a scratch folder
on local disk (under the output's staging folder where it is local, else TMPDIR;
`transforms/storage/scratch.py`: removed however the build ends) and are read back one
at a time.
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.scratch import scratch_folder
from nmtpipe.transforms.text.records import utf8_text
from nmtpipe.transforms.vocab.kinds.subword import escape_token

T = TypeVar("T")


@dataclass
class Chunk:
    """Escaped tokens as code points, concatenated, each one's length and count."""

    chars: np.ndarray  # uint32
    sizes: np.ndarray  # int64
    weights: np.ndarray  # float64

    @cached_property
    def token_end(self) -> np.ndarray:
        return np.cumsum(self.sizes, dtype=np.int64)

    @cached_property
    def token_start(self) -> np.ndarray:
        return self.token_end - self.sizes

    @cached_property
    def weight_at(self) -> np.ndarray:
        """Each position's token count."""
        return np.repeat(self.weights, self.sizes)

    @property
    def text(self) -> str:
        return self.chars.tobytes().decode("utf-32-le", "surrogatepass")

    def room(self, max_subtoken_length: int | None) -> np.ndarray:
        """How long a counted substring starting at each position may be: to its token's
        end, and (T2T's off-by-one) only `max_subtoken_length - 1` characters when a
        maximum is given."""
        room = np.repeat(self.token_end, self.sizes) - np.arange(self.chars.size, dtype=np.int64)
        if max_subtoken_length is not None:
            np.minimum(room, max(max_subtoken_length - 1, 0), out=room)
        return room

    def occurrences(self, needle: str) -> np.ndarray:
        """Positions where `needle` occurs inside one token."""
        text, found = self.text, []
        at = text.find(needle)
        while at >= 0:
            found.append(at)
            at = text.find(needle, at + 1)
        starts = np.asarray(found, dtype=np.int64)
        token = np.searchsorted(self.token_end, starts, side="right")
        return starts[starts + len(needle) <= self.token_end[token]]


class TokenChunks:
    """Token counts, split into chunks of at most `budget` characters (0: one chunk).

    Made in two steps, since escaping needs the alphabet, which only every token gives:
    the tokens are taken as they are (`characters` then says which they hold), then
    `escape` turns each chunk into a `Chunk`. Per chunk, named arrays can be kept beside
    it (`put`, `get`), on disk when the tokens are."""

    def __init__(
        self,
        batches: Iterable[tuple[pa.Array, np.ndarray]],
        budget: int,
        threads: int = 1,
        spill: str | None = None,
    ) -> None:
        """`budget` characters are held at once (0: every one), by `threads` threads,
        each with a chunk of its own; the rest wait in a scratch folder under the local
        folder `spill` (default: TMPDIR)."""
        self.threads = max(threads, 1)
        self._spill = spill
        budget = max(budget // self.threads, 1) if budget else 0
        self._memory: list[dict[str, object]] = []
        self._directory: tempfile.TemporaryDirectory[str] | None = None
        self._count = 0
        self.size = 0  # characters, escaped (a backslash or underscore counted once)
        seen: set[str] = set()
        pending: list[tuple[pa.Array, np.ndarray]] = []
        held = 0
        for tokens, counts in _split(batches, budget):
            size = int(pc.sum(pc.utf8_length(tokens)).as_py() or 0) + len(tokens)
            if budget and pending and held + size > budget:
                self._add_raw(pending)
                pending, held = [], 0
            pending.append((tokens, counts))
            seen.update(characters_of(tokens))
            held += size
            self.size += size
        if pending or not self._count:
            self._add_raw(pending)
        self.characters = "".join(sorted(seen))

    def __len__(self) -> int:
        return self._count

    def _add_raw(self, parts: list[tuple[pa.Array, np.ndarray]]) -> None:
        tokens = pa.concat_arrays([t.cast(pa.string()) for t, _ in parts]) if parts else None
        counts = np.concatenate([c for _, c in parts]) if parts else np.zeros(0)
        if self._count == 1 and self._directory is None:  # a second chunk: all go to disk
            self._directory = scratch_folder("t2t", self._spill)
            first = self._memory.pop()
            self._put_raw(0, first["tokens"], first["weights"])
        self._count += 1
        if self._directory is None:
            self._memory.append({})
        self._put_raw(self._count - 1, tokens, counts.astype(np.float64))

    def _put_raw(self, i: int, tokens: pa.Array | None, weights: np.ndarray) -> None:
        tokens = pa.array([], pa.string()) if tokens is None else tokens
        if self._directory is None:
            self._memory[i].update(tokens=tokens, weights=weights)
            return
        schema = pa.schema([("token", pa.string())])
        path = self._path(i, "tokens")
        with (
            fsio.naming_a_full_disk(str(path)),
            open(path, "wb") as sink,
            pa.ipc.new_file(sink, schema) as writer,
        ):
            writer.write_batch(pa.record_batch([tokens], names=["token"]))
        self.put(i, "weights", weights)

    def _raw_tokens(self, i: int) -> pa.Array:
        if self._directory is None:
            return self._memory[i].pop("tokens")
        path = self._path(i, "tokens")
        with pa.memory_map(str(path)) as source:
            tokens = pa.ipc.open_file(source).read_all()["token"].combine_chunks()
        tokens = pa.concat_arrays([tokens])  # a copy, off the map, before the file goes
        path.unlink()
        return tokens

    def escape(self, alphabet: frozenset[str]) -> None:
        """Turn each chunk's tokens into escaped code points (`chunk`)."""
        for i in range(len(self)):
            chars, sizes = escaped_text(self._raw_tokens(i), alphabet)
            self.put(i, "chars", chars)
            self.put(i, "sizes", sizes)

    @property
    def spilled(self) -> bool:
        return self._directory is not None

    def _path(self, i: int, name: str) -> Path:
        assert self._directory is not None
        return Path(self._directory.name) / f"{i}.{name}"

    def put(self, i: int, name: str, array: np.ndarray) -> None:
        """Keep `array` under `name` for chunk `i` (replacing one of that name)."""
        if self._directory is None:
            self._memory[i][name] = array
        else:
            path = self._path(i, name)
            with fsio.naming_a_full_disk(str(path)), open(path, "wb") as f:
                np.save(f, array, allow_pickle=False)

    def get(self, i: int, name: str) -> np.ndarray:
        if self._directory is None:
            array = self._memory[i][name]
            assert isinstance(array, np.ndarray)
            return array
        with open(self._path(i, name), "rb") as f:
            return np.load(f, allow_pickle=False)

    def chunk(self, i: int) -> Chunk:
        """Chunk `i`; in memory, the same object each time (with what it derived)."""
        if self._directory is None:
            found = self._memory[i].get("chunk")
            if not isinstance(found, Chunk):
                found = self._memory[i]["chunk"] = Chunk(
                    self.get(i, "chars"), self.get(i, "sizes"), self.get(i, "weights")
                )
            return found
        return Chunk(self.get(i, "chars"), self.get(i, "sizes"), self.get(i, "weights"))

    def __iter__(self) -> Iterator[tuple[int, Chunk]]:
        for i in range(len(self)):
            yield i, self.chunk(i)

    def map(self, fn: Callable[[int, Chunk], T]) -> Iterator[T]:
        """`fn(i, chunk)` of each chunk, in order, `threads` chunks at a time (numpy and
        Arrow work without Python's lock for most of a chunk's arrays)."""
        if len(self) == 1 or self.threads == 1:
            for i, chunk in self:
                yield fn(i, chunk)
            return
        with ThreadPoolExecutor(self.threads, thread_name_prefix="t2t-chunk") as pool:
            pending: deque[Future[T]] = deque()
            for i in range(len(self)):
                pending.append(pool.submit(lambda i=i: fn(i, self.chunk(i))))  # type: ignore[misc]
                if len(pending) > self.threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def close(self) -> None:
        """Remove the chunks' files (also done when the object is collected)."""
        if self._directory is not None:
            self._directory.cleanup()


def _split(
    batches: Iterable[tuple[pa.Array, np.ndarray]], budget: int
) -> Iterator[tuple[pa.Array, np.ndarray]]:
    """The batches, none holding more than about `budget` characters (0: as they are)."""
    for tokens, counts in batches:
        step = max(budget // 64, 1) if budget else len(tokens)
        for start in range(0, len(tokens), max(step, 1)):
            yield tokens[start : start + step], counts[start : start + step]


def escaped_text(tokens: pa.Array, alphabet: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """The tokens escaped as T2T escapes them, as concatenated code points, and each
    one's length.

    Most tokens need only their closing `_`: those with a backslash, an underscore or a
    line break (or, with a smaller alphabet, a character outside it) go through
    `escape_token` one by one."""
    tokens = tokens.cast(pa.string())
    if len(tokens) == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64)
    special = pc.match_substring_regex(tokens, r"[\\_\n]").to_numpy(zero_copy_only=False)
    outside = set(characters_of(tokens)) - set(alphabet)
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
    chars = np.frombuffer(utf8_text(escaped).encode("utf-32-le", "surrogatepass"), np.uint32)
    return chars, sizes


def characters_of(tokens: pa.Array) -> str:
    """Every character of `tokens`, once each (in code-point order)."""
    if len(tokens) == 0:
        return ""
    points = np.frombuffer(utf8_text(tokens).encode("utf-32-le", "surrogatepass"), np.uint32)
    return np.unique(points).tobytes().decode("utf-32-le", "surrogatepass")
