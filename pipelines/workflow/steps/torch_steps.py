"""The steps whose work is a torch job (train, decode): their shape and their engine.

A torch step's work is its job (`launch.Job`: a training or decoding config with its
output wired), run on `nproc` processes of this machine under torchrun
(`launch.run_job`). The job writes its files into the output as it goes (checkpoints,
translations); once it has ended, the driver lists those the step owns, with their
sizes and digests, and commits them by the manifest, written last. A rank never
commits: a job that failed or was killed leaves no manifest, and its re-run goes on from
what it left (training from its last checkpoint). No Beam here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from nmtpipe.pipelines.workflow.steps.protocol import Engine, How, Step, Written
from nmtpipe.trainers.train.launch import Job, run_job
from nmtpipe.transforms.storage import fsio


def where(nproc: int) -> str:
    """Where a job of `nproc` processes runs, as a step's outcome says it."""
    return "this process" if nproc <= 1 else f"torchrun, {nproc} processes"


class _Jobs(Engine):
    """Each step's job, one after the other, on its processes; the steps are committed
    as their jobs end, so a later one that fails loses none of the earlier."""

    def build(self, steps: list[TorchStep], how: How) -> Iterator[tuple[Written, str]]:
        for step in steps:
            how.log(step.announce(where(step.nproc)))
            run_job(step.job, step.nproc, not how.quiet, rank_module=how.rank_module)
            yield step.write(), where(step.nproc)


class TorchStep(Step):
    """A step whose work is a torch job; its manifest's `stats` is the job's summary."""

    engine = _Jobs()
    job: Job
    nproc: int = 1
    # The entries of the output's last commit, by path, read when the step was planned:
    # a file unchanged since (its size and its store's version marker) keeps its digest,
    # so that a model's numbered checkpoints are read once, not at every commit.
    known: Mapping[str, dict[str, Any]] = MappingProxyType({})

    def announce(self, runner: str) -> str:
        """The line said before the job starts."""
        return f"{self.job.name}: {self.output} on {runner}"

    def write(self) -> Written:
        """The files of the output that the step owns, as the job left them, with the
        job's summary as the statistics."""
        files = []
        for url in fsio.find(self.output):
            rel = fsio.relative_to(self.output, url)
            if self.ours.match(rel):
                files.append(self._entry(rel, url))
        summary = json.loads(fsio.read_bytes(fsio.join(self.output, self.job.summary_file)))
        return Written(files, summary, self.job.summary_file)

    def _entry(self, rel: str, url: str) -> dict[str, Any]:
        identity = fsio.file_identity(url)
        size, version = identity["size"], identity["version"]
        known = self.known.get(rel, {})
        unchanged = version is not None and (known.get("size"), known.get("version")) == (
            size, version
        )  # fmt: skip
        sha256 = known["sha256"] if unchanged else fsio.sha256_of(url)
        return {"path": rel, "kind": self.job.name, "size": size, "version": version,
                "sha256": sha256}  # fmt: skip
