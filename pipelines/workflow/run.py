"""`nmtpipe run CONFIG`: the whole chain from one config, every step cached.

Each step runs with its typed config (`run_config.py`), wired under the root. prepare,
vocab and encode report `cached` when their output already holds the result (their
manifests' fingerprints cover inputs and options) and rebuild in place when an input or
option changed. train and decode are skipped when their record says they finished with
the same options and input (`step_outputs.py`); a changed training option continues
from the last checkpoint, and decoding follows.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nmtpipe.pipelines.workflow import step_outputs
from nmtpipe.pipelines.workflow.encode import run_encode
from nmtpipe.pipelines.workflow.prepare import run_prepare
from nmtpipe.pipelines.workflow.report import write_report
from nmtpipe.pipelines.workflow.run_config import BEAM_STEPS, STEPS, WIRING, RunConfig
from nmtpipe.pipelines.workflow.vocab import run_vocab
from nmtpipe.trainers.train.launch import run_job
from nmtpipe.transforms.storage import manifest

# What a step has to show when it has run: (step, its outcome or summary).
Show = Callable[[str, Any], None]


@dataclass
class StepResult:
    step: str
    status: str  # ran, cached, failed, skipped (outside --from/--until)
    seconds: float = 0.0
    figures: str = ""
    error: Exception | None = None  # why it failed


def run_workflow(
    config: RunConfig,
    first: str = "prepare",
    last: str = "decode",
    log: Callable[[str], None] = print,
    show: Show = lambda step, result: None,
    quiet: bool = True,
    rank_module: str | None = None,
) -> list[StepResult]:
    """Run the steps from `first` to `last`; stop at the first that fails (its result
    holds the error). `quiet` keeps local Beam workers off the terminal and decoding's
    progress to itself; `rank_module` is what each torchrun rank runs (`run_job`)."""
    chosen = STEPS[STEPS.index(first) : STEPS.index(last) + 1]
    results = []
    for step in STEPS:
        if step not in chosen:
            results.append(StepResult(step, "skipped"))
            continue
        log(f"== {step}")
        started = time.perf_counter()
        try:
            status = _run_one(config, step, log, show, quiet, rank_module)
        except Exception as error:
            results.append(StepResult(step, "failed", time.perf_counter() - started, error=error))
            break
        result = StepResult(step, status, time.perf_counter() - started)
        result.figures = step_outputs.figures(config, step)
        results.append(result)
    return results


def _run_one(
    config: RunConfig,
    step: str,
    log: Callable[[str], None],
    show: Show,
    quiet: bool,
    rank_module: str | None,
) -> str:
    if step in BEAM_STEPS:
        run = {"prepare": run_prepare, "vocab": run_vocab, "encode": run_encode}[step]
        # A Beam step's output is rebuilt in place when the config changes.
        outcome = run(config.step(step), list(config.beam), replace=True, log=log, quiet=quiet)
        show(step, outcome)
        return "cached" if outcome.cached else "ran"
    fingerprint = manifest.fingerprint(
        {
            "step": step,
            "options": config.fingerprinted(step),
            "input": step_outputs.upstream_fingerprint(config, step),
        }
    )
    record = step_outputs.read_record(config, step)
    if record is not None and record["fingerprint"] == fingerprint:
        return "cached"
    if record is not None:
        step_outputs.remove_record(config, step)
    nproc = config.nproc.get(step, 1)
    on = {"verbose": not quiet, "rank_module": rank_module}
    if step == "train":
        show(step, run_job(config.train, nproc, **on))
    else:
        job = dataclasses.replace(config.decode, checkpoint=config.decode_checkpoint())
        show(step, run_job(job, nproc, **on))
        for extra in config.evaluate:
            output = config.decoded(extra.name)
            extra_job = dataclasses.replace(job, inputs=extra.inputs, references=extra.references,
                                            output=output)  # fmt: skip
            show(step, run_job(extra_job, nproc, **on))
    step_outputs.write_record(config, step, fingerprint)
    return "ran"


def summary_table(results: list[StepResult]) -> str:
    rows = [("step", "status", "time", "result")]
    rows += [
        (r.step, r.status, f"{r.seconds:.1f} s" if r.seconds else "", r.figures) for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ).rstrip()


def write_run_report(config: RunConfig) -> str | None:
    """The report of the furthest Beam step's committed output under the root (encoded,
    else prepared), written beside it; its URL, or None before prepare has run."""
    for step in ("encode", "prepare"):
        if step_outputs.committed(config, step) is not None:
            return write_report(config.url(WIRING[step]["output"]))
    return None
