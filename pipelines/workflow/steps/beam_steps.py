"""The steps whose work is a Beam graph or the driver's (prepare, vocab, encode): their
shape and their engine.

A Beam step adds to the protocol (`protocol.py`) its **graph**, the Beam transform that
writes its files and a summary of them (or, for a step whose files the driver writes,
what the driver reads: a vocabulary's sample; None: nothing), and its **write**: the
files checked and completed from the summary, its statistics. The engine runs the graphs
of a call's steps as one pipeline (one job on a remote runner), on the options Beam was
given, then has each step write.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from abc import abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from nmtpipe.pipelines.beam.options import (
    describe,
    in_process,
    pipeline_options,
    run_branches,
    runs_locally,
)
from nmtpipe.pipelines.workflow.steps.protocol import Engine, How, Log, Step, Written
from nmtpipe.transforms.formats.step_summary import read_summary
from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.storage.commit import STAGING, building
from nmtpipe.transforms.storage.read_meter import Meter

if TYPE_CHECKING:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

IN_PROCESS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def check_options(beam_args: tuple[str, ...]) -> None:
    """Beam's options parsed, so that a typo fails before any work."""
    pipeline_options(list(beam_args))


class _Pipeline(Engine):
    """The graphs of a call's steps run as one pipeline (so none may read another's
    output); with `how.in_process_bytes`, work small enough for it (`in_process`) runs
    in this process on a local runner, whatever mode the Beam options name (a refresh's
    small change). Then each step writes its files on the driver."""

    def build(self, steps: list[BeamStep], how: How) -> Iterator[tuple[Written, str]]:
        beam_args = list(how.beam_args)
        size = sum(step.input_bytes for step in steps)
        cores = max(step.cores_per_worker for step in steps)
        options = pipeline_options(beam_args, size, cores_per_worker=cores)
        small = how.in_process_bytes is not None and in_process(size, how.in_process_bytes)
        if small and runs_locally(options):
            beam_args = [*beam_args, *IN_PROCESS]
            options = pipeline_options(beam_args, size, cores_per_worker=cores)
        meter = Meter(fsio.join(steps[0].output, STAGING, f"read-{uuid.uuid4().hex}"), size)
        graphs = [step.graph(options, meter) for step in steps]
        runner = describe(options, size) if any(graphs) else "the driver"
        for step in steps:
            how.log(step.announce(runner, options))
        try:
            if any(graphs):
                branches = [g for g in graphs if g is not None]
                run_branches(options, steps[0].label, branches, how.quiet, meter)
        finally:
            for step in steps:
                step.release()
        for step, graph in zip(steps, graphs, strict=True):
            summarised = graph is not None and step.summarised
            summary = read_summary(step.summary_url) if summarised else None
            yield step.write(summary, how.log), runner


class BeamStep(Step):
    """A step whose work is a Beam graph, or the driver's."""

    engine = _Pipeline()
    label = "Step"  # the pipeline's label for its graphs
    input_bytes = 0  # what its work reads (picks the local runner's mode)
    cores_per_worker = 1  # the cores one worker of its graph keeps busy
    summarised: ClassVar[bool] = True  # its graph leaves a summary at `summary_url`

    @functools.cached_property
    def summary_url(self) -> str:
        """Where its graph leaves the summary of what it wrote (one per run)."""
        return fsio.join(self.output, STAGING, f"summary-{uuid.uuid4().hex}.json")

    def graph(self, options: PipelineOptions, meter: Meter | None = None) -> beam.PTransform | None:
        """The Beam graph that writes the step's files and `summary_url` (or, where the
        driver writes the files, in `write`, what it reads there), its readers counting
        the input they read into `meter` (the progress shown); None: no Beam work."""
        return None

    @abstractmethod
    def announce(self, runner: str, options: PipelineOptions) -> str:
        """The line said before the work starts."""

    @abstractmethod
    def write(self, summary: dict[str, Any] | None, log: Log) -> Written:
        """The step's own part of the commit, after its graph ran (`summary`: what the
        graph wrote; None without one), `log` where to say what a user should know:
        checked, completed, its statistics."""

    def building(self) -> contextlib.AbstractContextManager[None]:
        """A failure (an error, a full disk, Ctrl-C) leaves nothing uncommitted behind,
        nor an output folder this run made (`commit.building`)."""
        return building(self.output, self.ours)

    def release(self) -> None:
        """Remove what the graph left on its way (spilled batches), run or failed."""
