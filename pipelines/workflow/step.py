"""The one shape of a Beam step on the driver (prepare, vocab, encode): reuse a committed
result, or build and commit one, and say which.

A step supplies only what differs (`Step`): its output, kind and fingerprint, worked out
before anything is built; its build, which runs Beam and commits; and whether its output
keeps statistics (`stats.json`). `run_step` does the rest, the same for every step:
Beam's options checked first, so that a typo fails before any work; the committed
result reused when it holds exactly this one (`transforms/storage/commit.py`); the
outcome timed and reported.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from nmtpipe.pipelines.beam.options import pipeline_options
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.commit import StepOutcome, reuse_committed
from nmtpipe.transforms.storage.manifest import STATS_FILE

Log = Callable[[str], None]


class Step(ABC):
    """One step's output, planned: where it goes, its kind and its fingerprint (set by
    the constructor, which reads the inputs but builds nothing), and how it is built."""

    output: str
    kind: str
    fingerprint: str
    keeps_stats = True  # its output has a stats.json

    @abstractmethod
    def build(self, beam_args: list[str], log: Log, quiet: bool) -> tuple[dict, dict, str]:
        """Build the output and commit it: its manifest, statistics and the runner's
        description."""

    def reuse(self, force: bool, replace: bool, log: Log) -> tuple[dict, dict] | None:
        """The committed manifest and statistics if the output holds exactly this result
        (never with `force`; another result is replaced only with `replace`), else None."""
        committed = reuse_committed(self.output, self.kind, self.fingerprint, force, log, replace)
        if committed is None:
            return None
        if not self.keeps_stats:
            return committed, {}
        return committed, json.loads(fsio.read_bytes(fsio.join(self.output, STATS_FILE)))


def run_step(
    plan: Callable[[], Step],
    beam_args: list[str],
    force: bool = False,
    replace: bool = False,
    log: Log = lambda _: None,
    quiet: bool = False,
) -> StepOutcome:
    """The step `plan` makes, reused if its output holds this result, else built and
    committed. `quiet` keeps local Beam workers off the terminal (see `run_pipeline`)."""
    started = time.perf_counter()
    pipeline_options(beam_args)  # fail early on bad Beam options
    step = plan()
    reused = step.reuse(force, replace, log)
    if reused is not None:
        committed, stats = reused
        return StepOutcome(
            step.output, True, committed, stats, time.perf_counter() - started, "cached"
        )
    committed, stats, runner = step.build(beam_args, log, quiet)
    return StepOutcome(step.output, False, committed, stats, time.perf_counter() - started, runner)
