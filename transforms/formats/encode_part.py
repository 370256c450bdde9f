"""Encoding one part of a prepared split: some row groups in, binary shards out.

A part is a run of row groups of one prepared Parquet shard (about 64k pairs), so that
work spreads over workers however the data was sharded, and a part's input fits in
memory. `encode_part` reads its row groups (one retried read), encodes both sides in
batches with EOS (in `EncodeSpec.threads` threads, a few batches ahead of the writing),
and streams the ids into an Arrow file and a fairseq `.bin` per language, each
committed atomically (big files are spooled locally and uploaded with retries). It
returns the files as manifest entries and the counts (tokens, unknowns, length
histograms) as a stats partial; `transforms/beam/encode.py` runs it in Beam.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.formats import fairseq_mmap, shard_names
from nmtpipe.transforms.formats.arrow_shards import ArrowWriter
from nmtpipe.transforms.formats.encoded_dataset import ARROW, FAIRSEQ
from nmtpipe.transforms.formats.fairseq_mmap import MMapWriter
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.fsio import AtomicFile
from nmtpipe.transforms.storage.manifest import FileEntry, file_entry, read_parquet_entry
from nmtpipe.transforms.text.stats import histogram
from nmtpipe.transforms.vocab import id_layout
from nmtpipe.transforms.vocab.kinds.base import SideEncoder
from nmtpipe.transforms.vocab.kinds.registry import kind_of
from nmtpipe.transforms.vocab.vocabulary import Vocabulary


class EncodeTask(NamedTuple):
    """Part `part` of `parts` of a split: row groups `row_groups` of the shard that the
    manifest entry `shard` of the prepared output at `root` lists (`whole`: all of them,
    so the shard's sha256 is checked as it is read; else its pages' CRCs); `size`: its
    share of the shard's bytes, by rows (what it counts as read)."""

    split: str
    part: int
    parts: int
    root: str
    shard: dict[str, Any]
    row_groups: tuple[int, ...]
    whole: bool
    fairseq_prefix: str
    size: int = 0

    @property
    def url(self) -> str:
        return fsio.join(self.root, self.shard["path"])

    @property
    def arrow_path(self) -> str:
        return shard_names.arrow_path(self.split, self.part, self.parts)


@dataclass(frozen=True)
class EncodeSpec:
    """Everything a worker needs besides the task (small: pickled with the DoFn)."""

    output: str
    vocab_root: str
    vocab_doc: dict[str, Any]
    langs: dict[str, str]
    formats: tuple[str, ...]
    arrow_dtype: str
    fairseq_dtype: str
    batch_size: int
    threads: int = 1  # threads that encode batches in one worker (`_encoded`)


class _SideCounts:
    """Tokens, unknowns and a length histogram of one side of one shard."""

    def __init__(self) -> None:
        self.tokens = 0
        self.unk = 0
        self.lengths: list[np.ndarray] = []

    def add(self, encoder: SideEncoder, flat: np.ndarray, lengths: np.ndarray) -> None:
        self.tokens += int(flat.size)
        self.unk += encoder.unknowns(flat)
        self.lengths.append(lengths)

    @property
    def items(self) -> int:
        return sum(lengths.size for lengths in self.lengths)

    def partial(self) -> dict[str, Any]:
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        return {"tokens": self.tokens, "unk": self.unk, "length_hist": histogram(lengths)}


class _PartWriters:
    """The output files of one part, open in `stack`: an Arrow file and/or one fairseq
    `.bin` per language. `entries()` (after the stack has closed, and so committed them)
    writes the `.idx` files and returns the manifest entries of all of them."""

    def __init__(self, spec: EncodeSpec, task: EncodeTask, stack: contextlib.ExitStack):
        self.spec, self.task = spec, task
        self._layout = kind_of(spec.vocab_doc["model"]).layout
        self._arrow_file = self._arrow = None
        self._bin_files: dict[str, AtomicFile] = {}
        self._bins: dict[str, MMapWriter] = {}
        if ARROW in spec.formats:
            url = fsio.join(spec.output, task.arrow_path)
            self._arrow_file = stack.enter_context(fsio.spooled_write(url))
            self._arrow = ArrowWriter(
                self._arrow_file, np.dtype(spec.arrow_dtype), _arrow_metadata(spec)
            )
        if FAIRSEQ in spec.formats:
            for role, lang in spec.langs.items():
                url = fsio.join(spec.output, fairseq_mmap.bin_name(self._prefix(lang)))
                self._bin_files[role] = stack.enter_context(fsio.spooled_write(url))
                self._bins[role] = MMapWriter(self._bin_files[role], np.dtype(spec.fairseq_dtype))

    def _prefix(self, lang: str) -> str:
        return f"{self.task.fairseq_prefix}.{lang}"

    def add(self, ids: np.ndarray, encoded: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        if self._arrow is not None:
            self._arrow.add_batch(ids, encoded["src"], encoded["tgt"])
        for role, writer in self._bins.items():
            flat, lengths = encoded[role]
            writer.add_batch(id_layout.to_fairseq(self._layout, flat), lengths)

    def finish(self) -> None:
        if self._arrow is not None:
            self._arrow.close()

    def entries(self) -> Iterator[FileEntry]:
        out, task = self.spec.output, self.task
        if self._arrow is not None:
            written = self._arrow_file.written
            yield file_entry(
                out, written, "arrow", self._arrow.rows, split=task.split, part=task.part
            )
        for role, writer in self._bins.items():
            lang = self.spec.langs[role]
            common = {"split": task.split, "part": task.part, "lang": lang}
            written = self._bin_files[role].written
            yield file_entry(out, written, "fairseq-bin", writer.items, **common)
            idx_url = fsio.join(out, fairseq_mmap.idx_name(self._prefix(lang)))
            written = fsio.write_bytes(idx_url, writer.index())
            yield file_entry(out, written, "fairseq-idx", writer.items, **common)


def load_encoders(spec: EncodeSpec) -> dict[str, SideEncoder]:
    """The encoder of each role (`src`, `tgt`); a joined vocabulary is loaded once."""
    vocab = Vocabulary(spec.vocab_root, spec.vocab_doc)
    by_side: dict[str, SideEncoder] = {}
    encoders = {}
    for role, lang in spec.langs.items():
        side = vocab.side_of(lang)
        if side not in by_side:
            by_side[side] = vocab.encoder(lang)
        encoders[role] = by_side[side]
    return encoders


def encode_part(
    spec: EncodeSpec, encoders: Mapping[str, SideEncoder], task: EncodeTask
) -> tuple[list[FileEntry], dict[str, Any]]:
    """Encode one part; the manifest entries of its files and its stats partial."""
    counts = {role: _SideCounts() for role in encoders}
    with contextlib.ExitStack() as stack:
        writers = _PartWriters(spec, task, stack)
        groups = None if task.whole else list(task.row_groups)
        table = read_parquet_entry(task.root, task.shard, ["id", "src", "tgt"], groups)
        batches = table.to_batches(spec.batch_size)
        for batch, encoded in _encoded(encoders, batches, spec.threads):
            for role, encoder in encoders.items():
                counts[role].add(encoder, *encoded[role])
            writers.add(batch.column("id").to_numpy(), encoded)
        writers.finish()
    split = {"pairs": counts["src"].items, **{r: c.partial() for r, c in counts.items()}}
    return list(writers.entries()), {"splits": {task.split: split}}


def _encoded(
    encoders: Mapping[str, SideEncoder], batches: list[pa.RecordBatch], threads: int
) -> Iterator[tuple[pa.RecordBatch, dict[str, tuple[np.ndarray, np.ndarray]]]]:
    """Each batch with both sides encoded, in order. `threads` threads encode the
    batches ahead of the caller: SentencePiece and `tokenizers` release the GIL, so
    several batches encode at once, and the caller writes meanwhile. One thread
    encodes in the caller: a single thread ahead would only contend for the GIL with
    the writing (T2T's Python encoder) or for a core shared with other workers."""

    def encode(batch: pa.RecordBatch) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {r: e.encode_batch(batch.column(r).to_pylist()) for r, e in encoders.items()}

    if threads == 1:
        yield from ((batch, encode(batch)) for batch in batches)
        return
    with ThreadPoolExecutor(threads) as pool:
        ahead: deque[tuple[pa.RecordBatch, Future]] = deque()
        for batch in batches:
            ahead.append((batch, pool.submit(encode, batch)))
            if len(ahead) > threads:
                done, future = ahead.popleft()
                yield done, future.result()
        while ahead:
            done, future = ahead.popleft()
            yield done, future.result()


def _arrow_metadata(spec: EncodeSpec) -> dict[str, Any]:
    return {
        "languages": spec.langs,
        "layout": kind_of(spec.vocab_doc["model"]).layout.as_dict(),
        "vocab_fingerprint": spec.vocab_doc["fingerprint"],
    }
