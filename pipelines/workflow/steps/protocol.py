"""The one shape of a unit of work, whatever does the work: an output named by the
fingerprint of a typed config and of its inputs, committed by its manifest, written last.

A step (`Step`) supplies only what differs:
- its **plan**, made by its constructor, which reads the inputs and builds nothing: the
  output, the kind of result and the fingerprint;
- its **engine**, which does the work of several steps of its kind at once: a Beam
  graph's or the driver's (`beam_steps.py`: the graphs of a call as one pipeline), a
  torch job's (`torch_steps.py`: each under torchrun);
- its **manifest**, the files its work wrote and what it keeps of them.

What every step shares is here: a committed result reused when it holds exactly this one
(`reused`), and the tail of every commit (`commit_step`): `stats.json`, the dataset
card, and the manifest, its header the same for every step (`manifest_header`), written
last, by the driver. No Beam here, nor in the torch
side: a torch job's step is planned and committed where Beam is never loaded.
"""

from __future__ import annotations

import contextlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from nmtpipe import __version__
from nmtpipe.transforms.formats.dataset_card import write_card
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.commit import StepOutcome, commit, reuse_committed
from nmtpipe.transforms.storage.manifest import STATS_FILE, created_stamp, file_entry

Log = Callable[[str], None]


def _silent(_: str) -> None:
    """Say nothing: a library call's log."""


def _unseen(step: Step, outcome: StepOutcome) -> None:
    """Show nothing: a library call's outcomes are its result."""


@dataclass(frozen=True)
class How:
    """How the steps of one call run: Beam's options, `force` (rebuild even an identical
    result), `replace` (rebuild a result of other inputs or options, else refused), the
    log of what a user should know, `quiet` (local Beam workers and torch ranks keep off
    the terminal), the work a local runner keeps in this process whatever mode Beam's
    options name (`in_process_bytes`, a refresh's; None: as those options decide), the
    module each torchrun rank runs (`rank_module`), and `done`, told each step's
    outcome as it is reused or committed."""

    beam_args: tuple[str, ...] = ()
    force: bool = False
    replace: bool = False
    log: Log = _silent
    quiet: bool = False
    in_process_bytes: int | None = None
    rank_module: str | None = None
    done: Callable[[Step, StepOutcome], None] = _unseen


@dataclass
class Written:
    """What a step's files came to, before the common tail: their manifest entries and
    the statistics, in `stats_file` (None: none). `stats.json` is written here; a job
    writes its own summary."""

    files: list[dict[str, Any]]
    stats: dict[str, Any] | None
    stats_file: str = STATS_FILE


@dataclass(frozen=True)
class Evaluation:
    """A test set a step translated and scored: its name, the scores, and the output
    that holds the translations."""

    name: str
    scores: dict[str, Any]
    output: str


class Engine(ABC):
    """What does the work of the steps of one kind, several at a time."""

    @abstractmethod
    def build(self, steps: list[Any], how: How) -> Iterator[tuple[Written, str]]:
        """Do the work of `steps` (none of them reused): yield, for each in order, what
        it wrote and where it ran. Each is committed before the next is asked for."""


class Step(ABC):
    """One step's output, planned by the constructor (the inputs read, nothing built)."""

    output: str
    kind: str
    fingerprint: str
    ours: re.Pattern[str]  # the files the step's commit owns in its output
    code_version: str = __version__  # the nmtpipe its manifest says made it
    engine: ClassVar[Engine]  # what does its work
    command: ClassVar[str | None] = None  # the command whose report shows its outcome
    dataset_report: ClassVar[bool] = False  # the dataset report describes its output

    def continued(self, committed: dict[str, Any]) -> str | None:
        """What is said when the output holds another result of this step that it goes on
        from (a model trained further), which needs no `replace`; None: another result
        is replaced, only with `replace`."""
        return None

    def card(self, files: list[dict[str, Any]]) -> str | None:
        """The dataset card (`README.md`) of the output; None: none."""
        return None

    @abstractmethod
    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        """The manifest document less its header (`manifest_header`), committed last."""

    def figures(self, outcome: StepOutcome) -> str:
        """The key figures of its committed output, for a table of steps."""
        return ""

    def evaluation(self, outcome: StepOutcome) -> Evaluation | None:
        """The test set its output scores, if it scores one."""
        return None

    def building(self) -> contextlib.AbstractContextManager[None]:
        """Around the step's work, from finding whether its output holds the result to its
        commit: what a failure leaves of what it began. By default all of it (a torch job
        keeps its checkpoints to resume from)."""
        return contextlib.nullcontext()

    def places(self, outcome: StepOutcome) -> dict[str, str]:
        """What a person looks for in its committed output (a model, its learning curves,
        translations), by what it is, with its URL: where `nmtpipe run` ends."""
        return {}


Committed = tuple[dict[str, Any], dict[str, Any]]  # the manifest and the statistics


def manifest_header(step: Step) -> dict[str, Any]:
    """What every step's manifest holds first, written here alone: its kind, the nmtpipe
    that made it, when (`created`) and its fingerprint, by which it is reused."""
    return {
        "kind": step.kind,
        "code_version": step.code_version,
        "created": created_stamp(),
        "fingerprint": step.fingerprint,
    }


def commit_step(step: Step, written: Written) -> Committed:
    """The tail every step shares after its files: `stats.json`, the card, and the
    manifest (the step's document under the common header), written last, which
    commits the output."""
    files, stats, out = written.files, written.stats, step.output
    if stats is not None and written.stats_file == STATS_FILE:
        text = json.dumps(stats, indent=2, sort_keys=True).encode() + b"\n"
        written_file = fsio.write_bytes(fsio.join(out, STATS_FILE), text)
        files.append(file_entry(out, written_file, "stats", 1))
    card = step.card(files)
    if card is not None:
        files.append(write_card(out, card))
    doc = {**manifest_header(step), **step.manifest(files, stats)}
    return commit(out, step.kind, doc, step.ours), stats or {}


def read_stats(out: str, committed: dict[str, Any]) -> dict[str, Any]:
    """The statistics of a committed output, from the file its manifest's `stats` names
    (`stats.json`, a job's summary); {}: it keeps none."""
    name = committed.get("stats")
    return json.loads(fsio.read_bytes(fsio.join(out, name))) if name else {}


def reused(step: Step, how: How) -> Committed | None:
    """The committed manifest and statistics if the output holds exactly this result
    (never with `force`); else None, with the output's manifest gone (another result is
    replaced only with `replace`, unless the step goes on from it)."""
    out = step.output
    committed = reuse_committed(
        out, step.kind, step.fingerprint, how.force, how.log, how.replace, step.continued
    )
    return None if committed is None else (committed, read_stats(out, committed))
