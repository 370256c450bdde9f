"""`nmtpipe translate`: raw sentences in, translations out, in input order, streamed.

Lines are read by a thread into a bounded queue. The translator takes what is there —
at least one line, at most `buffer_size` — sorts it by length, cuts it into batches of
at most `max_tokens` padded source tokens, and writes the translations in input order
before it reads on. A file streams through in bounded memory, full batches at a time;
a line typed at a terminal is there alone and is answered at once (like
`fairseq-interactive`). Text goes through the normalisation and vocabulary training
used; output is detokenised; a blank line gives an empty one (`BeamSearch.translate`,
as CTranslate2 does). Two engines: nmtpipe's own beam search on a checkpoint,
or a CTranslate2 export (`trainers/export/ctranslate2_engine.py`).

Where the lines are files (--input, or stdin redirected from a file) their count is
known before the model loads: unless the translations go to the terminal, a bar over
them shows from the first second, after a line saying what loads.
"""

from __future__ import annotations

import itertools
import os
import queue
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Protocol

import numpy as np
import torch

from nmtpipe.trainers.data.batching import length_sorted_batches
from nmtpipe.trainers.data.decode_inputs import (
    TextCodec,
    count_lines,
    count_stream_lines,
    decode_line,
    prepared_source_text,
    read_lines,
)
from nmtpipe.trainers.generate.translate_config import TranslateConfig
from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.trainers.runtime.distributed import Ranks
from nmtpipe.transforms import progress as display
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.formats.encoded_dataset import committed_doc
from nmtpipe.transforms.vocab.id_layout import IdLayout
from nmtpipe.transforms.vocab.vocabulary import open_vocabulary

_END = object()


class Engine(Protocol):
    def encode(self, lines: list[str]) -> list[np.ndarray]:
        """Source ids (or tokens) per line, EOS included."""

    def translate(self, sources: list[np.ndarray]) -> list[list[tuple[str, float]]]:
        """The n-best (text, score) of each source, best first."""


class NmtpipeEngine:
    """nmtpipe's beam search on a checkpoint, with the text codec of its training data."""

    def __init__(self, config: TranslateConfig) -> None:
        assert config.checkpoint is not None
        state = checkpoint.load(config.checkpoint)
        train = state.get("train_config", {})
        data_url = config.data or train.get("data")
        if not data_url:
            raise InputError(f"{config.checkpoint} does not say its data; give --data")
        doc = committed_doc(data_url)
        fmt = train.get("format") or doc["formats"][0]
        checkpoint.check_match(state, config.checkpoint, doc, data_url, fmt)
        self.layout = IdLayout(**doc["id_layouts"][fmt])
        vocab = open_vocabulary(doc["vocab"]["url"])
        self.codec = TextCodec(vocab, doc["languages"], fmt, prepared_source_text(doc, True))
        self.ranks = Ranks()
        self.model = checkpoint.inference_model(state, self.ranks.device)
        self.search = BeamSearch(self.model, self.layout, config.search)
        self.limit = config.max_source_positions

    def encode(self, lines: list[str]) -> list[np.ndarray]:
        return [_fit(ids, self.limit) for ids in self.codec.encode_sources(lines)]

    def translate(self, sources: list[np.ndarray]) -> list[list[tuple[str, float]]]:
        found = self.search.translate(sources, self.ranks.device, self.ranks.autocast())
        tgt = self.codec.tgt_lang
        return [[(self.codec.decode(tgt, h.tokens), h.score) for h in hyps] for hyps in found]


def _fit(ids: np.ndarray, limit: int) -> np.ndarray:
    """At most `limit` ids, EOS kept (decode's truncation)."""
    return ids if ids.size <= limit else np.concatenate([ids[: limit - 1], ids[-1:]])


def stdin_lines(stream: IO[bytes]) -> Iterator[str]:
    """Lines of a byte stream; invalid UTF-8 is an error naming the line."""
    for number, raw in enumerate(iter(stream.readline, b""), start=1):
        yield decode_line(raw, "<stdin>", number)


def count_sources(inputs: Iterable[str]) -> int | None:
    """How many lines `source_lines` will give, where that is known without reading
    them up: files (stdin redirected from one, read through and rewound); None for
    stdin from a pipe or a terminal."""
    inputs = list(inputs)
    if inputs and inputs != ["-"]:
        return count_lines(inputs)
    stream = sys.stdin.buffer
    try:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return None
        start = stream.tell()
    except (OSError, ValueError):  # no file descriptor, or not seekable
        return None
    count = count_stream_lines(stream)
    stream.seek(start)
    return count


def source_lines(inputs: Iterable[str]) -> Iterator[str]:
    inputs = list(inputs)
    if not inputs or inputs == ["-"]:
        return stdin_lines(sys.stdin.buffer)
    return itertools.chain.from_iterable(read_lines(url) for url in inputs)


def ready_groups(lines: Iterator[str], most: int) -> Iterator[list[str]]:
    """Groups of the lines read so far: each waits for one line, then takes those already
    read, up to `most`. A reading thread stays at most `most` lines ahead."""
    pending: queue.Queue[Any] = queue.Queue(maxsize=most)

    def read() -> None:
        try:
            for line in lines:
                pending.put(line)
            pending.put(_END)
        except BaseException as e:  # handed to the consumer, raised there
            pending.put(e)

    threading.Thread(target=read, daemon=True, name="nmtpipe-translate-reader").start()
    while True:
        group: list[str] = []
        item = pending.get()
        while True:
            if item is _END or isinstance(item, BaseException):
                break
            group.append(item)
            if len(group) == most:
                break
            try:
                item = pending.get_nowait()
            except queue.Empty:
                break
        if group:
            yield group
        if isinstance(item, BaseException):
            raise item
        if item is _END:
            return


def translate_group(
    engine: Engine,
    lines: list[str],
    max_tokens: int,
    advance: Callable[[int], None] = lambda _: None,
) -> list[list[tuple[str, float]]]:
    """The n-best of each line, in order: sorted by length, batched by padded tokens
    (`advance`: told each batch's size as it is done)."""
    sources = engine.encode(lines)
    lengths = np.array([len(s) for s in sources], dtype=np.int64)
    out: list[list[tuple[str, float]]] = [[] for _ in lines]
    for rows in length_sorted_batches(lengths, max_tokens):
        for row, hyps in zip(rows, engine.translate([sources[r] for r in rows]), strict=True):
            out[int(row)] = hyps
        advance(len(rows))
    return out


def format_result(index: int, hyps: list[tuple[str, float]], nbest: int) -> str:
    """The best translation; with an n-best list, `index TAB score TAB text` per hypothesis."""
    if nbest == 1:
        return (hyps[0][0] if hyps else "") + "\n"
    return "".join(f"{index}\t{score:.4f}\t{text}\n" for text, score in hyps)


def make_engine(config: TranslateConfig) -> Engine:
    torch.set_num_threads(config.threads or os.cpu_count() or 1)
    if config.engine == "ctranslate2":
        # The [export] extra's ctranslate2, loaded only for this engine.
        from nmtpipe.trainers.export.ctranslate2_engine import CTranslate2Engine

        assert config.model is not None
        return CTranslate2Engine(
            config.model, config.search, config.max_source_positions, config.threads
        )
    return NmtpipeEngine(config)


def translate(config: TranslateConfig, out: IO[str],
              log: Callable[[str], None] = lambda _: None) -> dict[str, int]:  # fmt: skip
    """Translate `config.inputs` (or stdin) onto `out`; how many lines. With a known
    count of lines and `out` not a terminal, a bar over them and a line per stage."""
    total = count_sources(config.inputs)
    shown = total is not None and not out.isatty()
    bar = display.Progress("translate", total, "sentence", enabled=shown)
    with bar:
        model = (
            f"the checkpoint {config.checkpoint}"
            if config.engine == "nmtpipe"
            else f"the CTranslate2 model {config.model}"
        )
        (display.note if shown else log)(f"loading {model}")
        engine = make_engine(config)
        log("ready")
        count = 0
        for group in ready_groups(source_lines(config.inputs), config.buffer_size):
            for hyps in translate_group(engine, group, config.max_tokens, bar.update):
                out.write(format_result(count, hyps, config.search.nbest))
                count += 1
            out.flush()
    return {"sentences": count}
