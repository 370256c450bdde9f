"""The decoding job of one rank: beam search over a window of sentences at a time.

Every rank reads the same input stream, cut into windows of `buffer_size` sentences.
Within a window the sentences are sorted by source length and cut into batches of at
most `max_tokens` padded source tokens; rank r decodes batches r, r + world, ... and
detokenises its results; the first rank gathers them, puts them back in input order and
appends them to the outputs, which become visible only when the job is done:

- `hypotheses.txt`: the best translation of each input line, one per line;
- `nbest.jsonl`: per input, the source, the reference and the n-best list (text, score,
  log-probability, token count, whether it ended in EOS);
- `scores.json`: BLEU and chrF (sacrebleu) against the references, when there are any,
  and what the job did (sentences, truncated or skipped inputs, speed). Written last:
  the outputs are complete when it is there (a re-run removes it first).

The first rank shows what the job is doing from its first second: the count of input
lines, then each stage of its start (the checkpoint, the data), then a bar over the
sentences that moves with every batch it translates (with several ranks, by the
batches every rank has reached when the first has; exact at each window's end).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nmtpipe.trainers.data.batching import length_sorted_batches
from nmtpipe.trainers.data.decode_inputs import (
    Sentence,
    TextCodec,
    count_lines,
    prepared_source_text,
    split_sentences,
    text_sentences,
    windows,
)
from nmtpipe.trainers.generate.scoring import CorpusScores, default_tokenize
from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.trainers.runtime.distributed import Ranks, open_on_ranks
from nmtpipe.trainers.runtime.run_files import HYPOTHESES, NBEST, SCORES
from nmtpipe.transforms import progress as display
from nmtpipe.transforms.errors import ConfigError, InputError, did_you_mean
from nmtpipe.transforms.formats.encoded_dataset import committed_doc
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.vocab.id_layout import IdLayout
from nmtpipe.transforms.vocab.vocabulary import open_vocabulary

if TYPE_CHECKING:  # DecodeConfig.run imports this module: importing it back would be a cycle
    from nmtpipe.trainers.generate.decode_config import DecodeConfig


@dataclass
class _Counts:
    sentences: int = 0
    truncated: int = 0
    skipped: int = 0
    unfinished: int = 0
    target_tokens: int = 0  # of the best hypotheses, EOS included

    def add(self, other: _Counts) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class _Outputs:
    """The first rank's output files, written as windows arrive, committed at the end."""

    def __init__(self, stack: contextlib.ExitStack, output: str) -> None:
        self.output = output
        self.hypotheses = stack.enter_context(fsio.spooled_write(self.url(HYPOTHESES)))
        self.nbest = stack.enter_context(fsio.spooled_write(self.url(NBEST)))

    def url(self, name: str) -> str:
        return fsio.join(self.output, name)

    def write(self, records: list[dict[str, Any]]) -> None:
        best = "".join(_best_text(r) + "\n" for r in records)
        self.hypotheses.write(best.encode("utf-8"))
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        self.nbest.write(lines.encode("utf-8"))


class Shown:
    """What the first rank shows of the job: a line per stage of its start, then a bar
    over the sentences (or what else it counts: `unit`) once their count is known;
    nothing on the other ranks."""

    def __init__(self, main: bool, what: str = "decode", unit: str = "sentence") -> None:
        self.main, self.what, self.unit = main, what, unit
        self._bar: display.Progress | None = None

    def say(self, text: str) -> None:
        if self.main:
            display.note(text)

    def start(self, total: int | None) -> None:
        """The bar, over `total` of its units (None: unknown)."""
        if self.main and self._bar is None:
            self._bar = display.Progress(self.what, total, self.unit)

    def update(self, n: int) -> None:
        if self._bar is not None and n:
            self._bar.update(n)

    def close(self, finished: bool) -> None:
        if self._bar is not None:
            self._bar.close(finished)
            self._bar = None


class Decoder:
    """One rank's share of a decoding job."""

    def __init__(self, config: DecodeConfig, ranks: Ranks, shown: Shown) -> None:
        self.config, self.ranks, self.shown = config, ranks, shown
        if config.inputs and ranks.main:
            shown.start(count_lines(config.inputs))
        shown.say(f"loading the checkpoint {config.checkpoint}")
        state = checkpoint.load(config.checkpoint)
        train_config = state.get("train_config", {})
        self.data_url = config.data or train_config.get("data")
        if not self.data_url:
            raise ConfigError(f"{config.checkpoint} does not say its data; give --data")
        fmt = config.format or train_config.get("format")
        self.dataset = None
        if config.inputs:
            shown.say(f"reading the vocabulary of {self.data_url}")
            self.doc = committed_doc(self.data_url)
            self.format = fmt or self.doc["formats"][0]
        else:
            splits = committed_doc(self.data_url)["splits"]
            _check_split(self.data_url, splits, config.split)
            shown.start(splits[config.split]["pairs"])
            shown.say(f"opening the {config.split} split of {self.data_url} (checking its files)")
            self.dataset = open_on_ranks(ranks, self.data_url, fmt, config.cache_dir)
            self.doc, self.format = self.dataset.manifest, self.dataset.format
        self.layout = IdLayout(**self.doc["id_layouts"][self.format])
        checkpoint.check_match(state, config.checkpoint, self.doc, self.data_url, self.format)
        vocab = open_vocabulary(self.doc["vocab"]["url"])
        source_text = prepared_source_text(self.doc, required=bool(config.inputs))
        self.codec = TextCodec(vocab, self.doc["languages"], self.format, source_text)
        self.model = checkpoint.inference_model(state, ranks.device)
        self.search = BeamSearch(self.model, self.layout, config.search)
        self.autocast = ranks.autocast()
        tgt = self.doc["languages"]["tgt"]
        self.scores = CorpusScores(config.bleu_tokenize or default_tokenize(tgt))

    # --- input ----------------------------------------------------------------------

    def sentences(self) -> Iterator[Sentence]:
        c = self.config
        if c.inputs:
            return text_sentences(list(c.inputs), list(c.references), self.codec)
        assert self.dataset is not None
        split = self.dataset[c.split]
        return split_sentences(split, c.split, self.doc, self.codec)

    def _fit(self, ids: np.ndarray) -> tuple[np.ndarray | None, str | None]:
        """An input within --max-source-positions: as is, truncated (EOS kept), or skipped."""
        limit = self.config.max_source_positions
        if ids.size <= limit:
            return ids, None
        if self.config.skip_invalid_size_inputs:
            return None, "skipped"
        return np.concatenate([ids[: limit - 1], ids[-1:]]), "truncated"

    def plan(self, window: list[Sentence]) -> list[np.ndarray]:
        """The batches of the window, every rank's: positions, sorted by source length
        (rank r decodes batches r, r + world, ...)."""
        lengths = np.array([s.ids.size for s in window], dtype=np.int64)
        capped = np.minimum(lengths, self.config.max_source_positions)
        return length_sorted_batches(capped, self.config.max_tokens)

    # --- decoding -------------------------------------------------------------------

    def _translate(self, batch: list[Sentence]) -> list[dict[str, Any]]:
        fitted = [self._fit(s.ids) for s in batch]
        live = [(s, ids) for s, (ids, _) in zip(batch, fitted, strict=True) if ids is not None]
        found = self.search.translate([ids for _, ids in live], self.ranks.device, self.autocast)
        hyps = iter(found)
        tgt = self.codec.tgt_lang
        records = []
        for s, (ids, note) in zip(batch, fitted, strict=True):
            nbest = [] if ids is None else next(hyps)
            record: dict[str, Any] = {
                "id": s.index,
                "source": s.source,
                "hypotheses": [
                    {"text": self.codec.decode(tgt, h.tokens), "score": round(h.score, 4),
                     "log_prob": round(h.log_prob, 4), "tokens": len(h.tokens) + int(h.finished),
                     "finished": h.finished}
                    for h in nbest
                ],
            }  # fmt: skip
            if s.reference is not None:
                record["reference"] = s.reference
            if note:
                record["input"] = note
            records.append(record)
        return records

    def _decode_window(self, window: list[Sentence]) -> tuple[list[dict[str, Any]], int]:
        """This rank's translations of the window, and how many sentences the bar has
        been moved by: on the first rank, after its k-th batch, those of the first k
        batches of every rank (the ranks go at about the same pace)."""
        batches, world = self.plan(window), self.ranks.world
        mine, moved = [], 0
        for k, positions in enumerate(batches[self.ranks.rank :: world]):
            mine += self._translate([window[int(p)] for p in positions])
            reached = sum(len(b) for b in batches[: (k + 1) * world])
            self.shown.update(reached - moved)
            moved = reached
        return mine, moved

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        counts = _Counts()
        scores_url = fsio.join(self.config.output, SCORES)
        if self.ranks.main and fsio.exists(scores_url):
            fsio.remove(scores_url)  # the commit mark of an earlier run's outputs
        with contextlib.ExitStack() as stack:
            outputs = _Outputs(stack, self.config.output) if self.ranks.main else None
            for window in self._windows():
                mine, moved = self._decode_window(window)
                gathered = self.ranks.gather_to_main(mine)
                if outputs is None:
                    continue
                by_id = {r["id"]: r for part in gathered for r in part}
                records = [by_id[s.index] for s in window]
                counts.add(_count(records))
                outputs.write(records)
                self._score(window, records)
                self.shown.update(len(records) - moved)
        seconds = time.perf_counter() - started
        summary = self._summary(counts, seconds)
        if self.ranks.main:
            fsio.write_bytes(
                scores_url,
                (json.dumps(summary, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
            )
        return summary

    def _windows(self) -> Iterator[list[Sentence]]:
        it = windows(self.sentences(), self.config.buffer_size)
        first = next(it, None)
        if first is None:
            what = (
                ", ".join(self.config.inputs) or f"the {self.config.split} split of {self.data_url}"
            )
            raise InputError(f"{what}: nothing to translate (no sentences)")
        return itertools.chain([first], it)

    def _score(self, window: list[Sentence], records: list[dict[str, Any]]) -> None:
        refs = [s.reference for s in window]
        if any(r is None for r in refs):
            return
        self.scores.add([_best_text(r) for r in records], refs)  # type: ignore[arg-type]

    def _summary(self, counts: _Counts, seconds: float) -> dict[str, Any]:
        c = self.config
        return {
            "checkpoint": c.checkpoint,
            "input": list(c.inputs) or {"data": self.data_url, "split": c.split},
            "search": {"convention": c.search.convention, **c.search.__dict__},
            "world": self.ranks.world,
            **self.scores.result(),  # first: its count of scored sentences is not the count
            **counts.__dict__,
            "seconds": round(seconds, 2),
            "sentences_per_s": round(counts.sentences / seconds, 2) if seconds else 0.0,
            "target_tokens_per_s": round(counts.target_tokens / seconds, 1) if seconds else 0.0,
        }


def _check_split(data_url: str, splits: dict[str, Any], split: str) -> None:
    """A --split the data has, or a usage error naming the one nearest and those it has."""
    if split not in splits:
        raise ConfigError(
            f"--split {split}: {fsio.canonical_url(data_url)} has no split {split!r}"
            f"{did_you_mean(split, splits)}; it has {', '.join(splits)}"
        )


def _best_text(record: dict[str, Any]) -> str:
    """The best translation ("" for a skipped input)."""
    return record["hypotheses"][0]["text"] if record["hypotheses"] else ""


def _count(records: list[dict[str, Any]]) -> _Counts:
    counts = _Counts(sentences=len(records))
    for r in records:
        counts.truncated += r.get("input") == "truncated"
        counts.skipped += r.get("input") == "skipped"
        if r["hypotheses"]:
            counts.unfinished += not r["hypotheses"][0]["finished"]
            counts.target_tokens += r["hypotheses"][0]["tokens"]
    return counts


def decode(config: DecodeConfig) -> dict[str, Any]:
    """Decode on this process's rank; returns the summary (complete on the first rank)."""
    ranks = Ranks()
    shown = Shown(ranks.main)
    try:
        summary = Decoder(config, ranks, shown).run()
        shown.close(finished=True)
        ranks.sum(0)  # every rank done before the group goes
        return summary
    finally:
        shown.close(finished=False)  # (a failed job's; a finished one's is closed)
        ranks.close()
