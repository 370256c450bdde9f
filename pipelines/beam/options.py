"""Beam pipeline options as nmtpipe passes them through: validated, defaulted, packaged.

Every subcommand that runs Beam accepts Beam's own flags (`--runner`,
`--direct_num_workers`, Dataflow's `--project`, Flink's `--flink_master`, ...). They are
checked against Beam's own option parser, so a typo is an error instead of Beam's
"Discarding unparseable args" warning, and remote runners get nmtpipe's code shipped to
their workers.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import enum
import functools
import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    SetupOptions,
    StandardOptions,
    WorkerOptions,
    _BeamArgumentParser,
)
from apache_beam.runners.runner import PipelineResult, PipelineState

from nmtpipe.pipelines.beam import internals, local_runner
from nmtpipe.pipelines.usage import unknown_options
from nmtpipe.transforms.errors import (
    ConfigError,
    NmtpipeError,
    RunnerError,
    comes_of,
    find_user_error,
)
from nmtpipe.transforms.options import duration, duration_text
from nmtpipe.transforms.progress import BYTES, heartbeat
from nmtpipe.transforms.storage.read_meter import Meter

# The FnApiRunner is the engine behind Beam's DirectRunner. Naming it directly skips the
# DirectRunner's first attempt to download and start the Prism runner (Beam >= 2.68),
# which costs time and fails on machines without internet access.
DEFAULT_RUNNER = "FnApiRunner"
# Up to this much input a local run stays in the driver's process: starting, feeding and
# stopping one worker process per core costs about 5 s, more than a second core saves on
# less input than this (prepare: about 9 µs a pair on two cores, 18 on one, 107 bytes a
# pair; benchmarks/RESULTS.md). The one threshold, `in_process` the one place it is
# applied: a refresh's small change uses it too (its own 16 MiB was never measured; this
# is a little under the crossover measured, about 59 MB).
IN_PROCESS_BYTES = 48 << 20
LOCAL_RUNNERS = {"FnApiRunner", "DirectRunner", "BundleBasedDirectRunner", "SwitchingDirectRunner"}
PACKAGED_RUNNERS = {"DataflowRunner", "FlinkRunner", "SparkRunner"}
# Modules every Beam worker imports at its start, on any runner (`--beam_plugins`): named,
# not imported, here, since importing one is what it does (`exit_freeze.py`).
WORKER_PLUGINS = ("nmtpipe.pipelines.beam.exit_freeze",)


# How long a step's Beam job on a remote runner may run, unless the user says: the help
# of `NmtpipeOptions`' --job_deadline says why.
DEFAULT_JOB_DEADLINE = "12h"


def _deadline(text: str) -> float:
    """`--job_deadline`'s value in seconds; argparse's error says the reason."""
    try:
        return duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class NmtpipeOptions(PipelineOptions):
    """nmtpipe's own pipeline options, given with Beam's (on the command line, in a
    config's `beam:` list) since they are about running the job."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--job_deadline",
            type=_deadline,
            default=DEFAULT_JOB_DEADLINE,
            metavar="DURATION",
            help="how long a step's Beam job on a remote runner (Flink, Spark, Dataflow, any"
            " portable runner) may run before nmtpipe cancels it and commits nothing, like"
            " 90s, 30m, 6h or seconds: an engine that lost its workers waits for them"
            " forever. The default is about 18 times the 40 minutes a 100M-pair prepare"
            " would take on a cluster of one 2-core worker (Flink with a worker pool, at the"
            " rate measured for 1M pairs: benchmarks/RESULTS.md), so only a job"
            " that stopped making progress meets it. Local runners have none.",
        )


class _Parser(_BeamArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise ConfigError(f"Beam option: {message}")


@functools.cache
def beam_parser() -> argparse.ArgumentParser:
    """Beam's own parser for every registered PipelineOptions class (built once: it has
    hundreds of options, and each driver checks its arguments more than once)."""
    parser = _Parser(allow_abbrev=False, add_help=False, prog="Beam pipeline options")
    seen = {}
    for cls in PipelineOptions.__subclasses__():
        seen.setdefault(str(cls), cls)
    for cls in seen.values():
        cls._add_argparse_args(parser)
    return parser


def beam_flags() -> list[str]:
    """Every option string Beam's parser knows (`--runner`, `--direct_num_workers`, ...)."""
    return [flag for action in beam_parser()._actions for flag in action.option_strings]


def check_beam_args(args: list[str], ours: Iterable[str] = ()) -> None:
    """Raise ConfigError naming the first argument that is neither ours nor Beam's, with
    the nearest option of either (`ours`: the command's own option strings)."""
    _, unknown = beam_parser().parse_known_args(args)
    error = unknown_options(unknown, [*ours, *beam_flags()], "see --help and --help-beam")
    if error is not None:
        raise error


def _project_file() -> Path | None:
    """pyproject.toml of the source tree nmtpipe runs from, if it runs from one."""
    candidate = Path(__file__).resolve().parents[2] / "pyproject.toml"
    return candidate if candidate.is_file() else None


# gcsfs for Dataflow's workers, which install nmtpipe's sdist without its extras.
DATAFLOW_REQUIREMENTS = Path(__file__).with_name("dataflow_requirements.txt")


def _packaging_args(options: PipelineOptions) -> list[str]:
    """`--setup_file` for remote workers when the user gave no way to ship nmtpipe; on
    Dataflow also the store client its workers need (`DATAFLOW_REQUIREMENTS`, installed
    by each worker from PyPI at its start) unless the user gave requirements."""
    setup = options.view_as(SetupOptions)
    worker = options.view_as(WorkerOptions)
    if setup.setup_file or setup.extra_packages or worker.sdk_container_image:
        return []
    project = _project_file()
    if project is None:
        raise ConfigError(
            "remote workers need nmtpipe's code: pass --setup_file PATH/TO/nmtpipe/pyproject.toml,"
            " --extra_package nmtpipe-X.whl or --sdk_container_image IMAGE"
        )
    args = ["--setup_file", str(project)]
    runner = options.view_as(StandardOptions).runner
    if runner == "DataflowRunner" and not setup.requirements_file:
        args += ["--requirements_file", str(DATAFLOW_REQUIREMENTS)]
        if not setup.requirements_cache:
            args.append("--requirements_cache=skip")
    return args


def _check_dataflow(options: PipelineOptions) -> None:
    gcp = options.view_as(GoogleCloudOptions)
    missing = [
        flag
        for flag, value in (
            ("--project", gcp.project),
            ("--region", gcp.region),
            ("--temp_location", gcp.temp_location),
        )
        if not value
    ]
    if missing:
        raise ConfigError(f"DataflowRunner needs {', '.join(missing)}")
    if not gcp.temp_location.startswith("gs://"):
        raise ConfigError(
            f"--temp_location must be a gs:// URL for Dataflow, not {gcp.temp_location}"
        )


def _given(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def in_process(input_bytes: int | None, in_process_bytes: int | None = None) -> bool:
    """Whether work of `input_bytes` (None: not known) is small enough to run in the
    driver's process on a local runner: at most `in_process_bytes`, by default
    `IN_PROCESS_BYTES`."""
    limit = IN_PROCESS_BYTES if in_process_bytes is None else in_process_bytes
    return input_bytes is not None and input_bytes <= limit


def pipeline_options(
    args: list[str],
    input_bytes: int | None = None,
    in_process_bytes: int | None = None,
    cores_per_worker: int = 1,
) -> PipelineOptions:
    """PipelineOptions for `args` with nmtpipe's defaults filled in and checked.

    Local runs default to the FnApiRunner: in this process when `input_bytes` (the
    work's input, when the caller knows it) is small enough (`in_process`: at most
    `in_process_bytes`, by default `IN_PROCESS_BYTES`), else one worker process per
    `cores_per_worker` cores (work that keeps several cores busy from one process, in
    threads outside the GIL, passes more than 1), in this process when that is one;
    the user's own `--direct_running_mode` or `--direct_num_workers` win. Remote
    runners get a worker package built from this source tree's pyproject.toml. Every
    worker imports `WORKER_PLUGINS` at its start. The graph is the same whatever is
    chosen.
    """
    check_beam_args(args)
    args = list(args)
    options = PipelineOptions(args)
    runner = options.view_as(StandardOptions).runner
    if runner is None:
        runner = DEFAULT_RUNNER
        args.append(f"--runner={runner}")
    if runner in LOCAL_RUNNERS:
        args += _local_defaults(args, input_bytes, in_process_bytes, cores_per_worker)
    if runner == "DataflowRunner":
        _check_dataflow(options)
    environment = options.view_as(PortableOptions).environment_type
    if runner in PACKAGED_RUNNERS and (
        runner == "DataflowRunner" or environment in (None, "DOCKER")
    ):
        args += _packaging_args(options)
    args += [f"--beam_plugins={plugin}" for plugin in WORKER_PLUGINS]
    return PipelineOptions(args)


def _cores() -> int:
    """This machine's cores, as the local runner's defaults count them."""
    return os.cpu_count() or 1


def _local_defaults(
    args: list[str], input_bytes: int | None, in_process_bytes: int | None, cores_per_worker: int
) -> list[str]:
    """The local runner's mode and workers, where the user chose neither."""
    mode, workers = _given(args, "--direct_running_mode"), _given(args, "--direct_num_workers")
    processes = max(1, _cores() // cores_per_worker)
    small = in_process(input_bytes, in_process_bytes)
    if not mode and not workers and (small or processes == 1):
        return ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    return ([] if workers else [f"--direct_num_workers={processes}"]) + (
        [] if mode else ["--direct_running_mode=multi_processing"]
    )


def worker_cores(options: PipelineOptions) -> int:
    """The cores one worker may keep busy: on a local runner, this machine's shared
    among its worker processes or threads; on a remote runner 1, since they run a
    worker process per core."""
    if not runs_locally(options):
        return 1
    direct = options.view_as(DirectOptions)
    workers = 1 if direct.direct_running_mode == "in_memory" else direct.direct_num_workers
    return max(1, _cores() // max(1, workers))


def runs_locally(options: PipelineOptions) -> bool:
    """Whether every worker runs on this machine (one of Beam's local runners)."""
    return options.view_as(StandardOptions).runner in LOCAL_RUNNERS


class Placement(enum.Enum):
    """Where a run's Beam work runs."""

    IN_PROCESS = "in this process (or its threads)"
    FORKED = "worker processes forked from nmtpipe's fork server"
    BEAM_WORKERS = "worker processes started by Beam"
    REMOTE = "on a remote runner's workers"


def placement(options: PipelineOptions) -> Placement:
    """The one decision of where a run with `options` (as `pipeline_options` made them:
    its mode picked by input size, or the user's) runs: every runner, the command line
    and library calls alike go by it. Local worker processes are forked unless this
    Beam's internals differ from what forking relies on (checked once, here, where
    workers are first needed: `internals.py`)."""
    if not runs_locally(options):
        return Placement.REMOTE
    if options.view_as(DirectOptions).direct_running_mode != "multi_processing":
        return Placement.IN_PROCESS
    return Placement.FORKED if internals.problem() is None else Placement.BEAM_WORKERS


_MODES = {"multi_processing": "worker processes", "multi_threading": "worker threads"}


def describe(options: PipelineOptions, input_bytes: int | None = None) -> str:
    """`FnApiRunner (in-process, 3 MB input)`, `FnApiRunner (2 worker processes, 107 MB
    input)` and the like, for the first line a command prints."""
    runner = options.view_as(StandardOptions).runner
    if runner not in LOCAL_RUNNERS:
        return str(runner)
    direct = options.view_as(DirectOptions)
    mode = direct.direct_running_mode
    how = (
        "in-process"
        if mode == "in_memory"
        else f"{direct.direct_num_workers} {_MODES.get(mode, mode + ' workers')}"
    )
    size = "" if input_bytes is None else f", {_megabytes(input_bytes)} input"
    return f"{runner} ({how}{size})"


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.0f} MB" if size >= 1e6 else f"{size / 1e6:.1f} MB"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@contextlib.contextmanager
def quiet_stderr(enabled: bool) -> Iterator[TextIO]:
    """While enabled, send whatever writes to file descriptor 2 — this process and the
    worker processes it starts — to /dev/null; Python errors still propagate. Yields
    where the user's stderr is meanwhile (for the progress display)."""
    if not enabled:
        yield sys.stderr
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        with os.fdopen(os.dup(saved), "w", buffering=1) as terminal:
            yield terminal
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def run_pipeline(
    pipeline: beam.Pipeline, quiet: bool = False, what: str = "Beam", meter: Meter | None = None
) -> None:
    """Run `pipeline` to completion; any end but DONE is an error.

    `quiet` silences what local worker processes write to the terminal (their logs and
    the tracebacks of failures, which reach the caller as the exception anyway). While
    it runs, the progress display shows `what` and the time it has taken and, given the
    `meter` its graph's readers count into, the input read so far against the total,
    with rate and ETA (`read_meter.py`: the same on every runner; its folder is removed
    at the end). A job on a remote runner still running after
    `--job_deadline` is cancelled and is an error: an engine that lost its workers waits
    for new ones rather than failing the job.
    """
    runner = pipeline.options.view_as(StandardOptions).runner
    if runner == "DataflowRunner" and not _installed("google.cloud.storage"):
        raise ConfigError("DataflowRunner needs Beam's GCP extras: pip install 'nmtpipe[dataflow]'")
    local = runner in LOCAL_RUNNERS
    deadline = None if local else pipeline.options.view_as(NmtpipeOptions).job_deadline
    read = None if meter is None else meter.read_so_far
    total = None if meter is None else meter.total
    with (
        _removed(meter),
        quiet_stderr(quiet and local) as terminal,
        heartbeat(f"{what} on {runner}", read, total, stream=terminal, unit=BYTES),
        local_runner.interrupt_kills_workers() if local else contextlib.nullcontext(),
    ):
        try:
            result = pipeline.run()
            # In milliseconds; when they pass first, Beam returns the state then (RUNNING).
            state = result.wait_until_finish(None if deadline is None else deadline * 1000)
        except BaseException as exc:
            if comes_of(exc, KeyboardInterrupt):
                said = f"interrupted while Beam ran {what}; it committed nothing"
                raise Interrupted(said) from exc
            failure = None if local or not isinstance(exc, Exception) else engine_failure(exc)
            if failure is None:
                raise
            raise RunnerError(f"the Beam job failed on {runner}: {failure}") from exc
        if deadline is not None and not PipelineState.is_terminal(state):
            raise RunnerError(_overdue(runner, deadline, _cancel_failure(result)))
    if state != PipelineState.DONE:
        raise NmtpipeError(f"the Beam pipeline ended in state {state}")


@contextlib.contextmanager
def _removed(meter: Meter | None) -> Iterator[None]:
    """The meter's folder removed when the run ends, however it ends."""
    try:
        yield
    finally:
        if meter is not None:
            with contextlib.suppress(Exception):  # (a failure says why it failed instead)
                meter.remove()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) while a pipeline ran: its message says what was left undone."""


def _cancel_failure(result: PipelineResult) -> str | None:
    """Cancel the job `result` follows; None when that worked, else why not (the
    caller is already failing: it says so, and goes on)."""
    try:
        result.cancel()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None


def _overdue(runner: str, deadline: float, cancel_failed: str | None) -> str:
    """The line of a job that outlived `--job_deadline` (cancelled unless
    `cancel_failed` says why not)."""
    cancelled = (
        "it was cancelled"
        if cancel_failed is None
        else f"cancelling it failed ({cancel_failed}), so cancel it on the cluster,"
    )
    return (
        f"the Beam job on {runner} did not finish within {duration_text(deadline)}"
        f" (--job_deadline); {cancelled} and nothing was committed. A remote engine that"
        " lost its workers waits for them: check the cluster's workers"
    )


# How the portable runners report a failed job: "Pipeline {job id} failed in state
# FAILED: {the engine's last error message}".
_JOB_FAILED = re.compile(r"^Pipeline (\S+) failed in state (\w+): ")


def engine_failure(exc: BaseException) -> str | None:
    """The engine's own error when a remote runner failed the job for a reason of its
    own (a Java exception from Flink or Spark: a lost TaskManager, too few network
    buffers), in one line with the job's id; None when nmtpipe's code failed in a worker
    (a Python traceback, or an error of nmtpipe's own), which is reported as such."""
    text = str(exc).strip()
    if find_user_error(exc) is not None or "Traceback (most recent call last)" in text:
        return None
    found = _JOB_FAILED.match(text)
    if found is None:
        return None
    lines = text[found.end() :].strip().splitlines() or [f"state {found.group(2)}"]
    return f"{lines[0]} (job {found.group(1)})"


def new_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """An empty pipeline on the runner `options` name, its local workers forked
    (`local_runner.py`) where `placement` says so."""
    runner = local_runner.LocalRunner() if placement(options) is Placement.FORKED else None
    with _own_temp_folder():
        return beam.Pipeline(runner=runner, options=options)


_OWN_TEMP = "nmtpipe-beam-"


@contextlib.contextmanager
def _own_temp_folder() -> Iterator[None]:
    """Beam's folder of a pipeline (`beam-pipeline-temp*`: made with it, removed when it
    has run) made in a folder of this process's own, `nmtpipe-beam-PID`, which is gone
    when the process ends; one whose process was killed is removed by the next run."""
    root = tempfile.gettempdir()
    for found in Path(root).glob(f"{_OWN_TEMP}*"):
        pid = found.name.removeprefix(_OWN_TEMP)
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(found, ignore_errors=True)
    mine = Path(root) / f"{_OWN_TEMP}{os.getpid()}"
    if not mine.exists():
        mine.mkdir()
        atexit.register(_remove_own, mine, os.getpid())
    previous, tempfile.tempdir = tempfile.tempdir, str(mine)
    try:
        yield
    finally:
        tempfile.tempdir = previous


def _remove_own(folder: Path, pid: int) -> None:
    """`folder` removed at the exit of the process that made it (not of a fork of it)."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    return True


def run_branches(
    options: PipelineOptions,
    name: str,
    branches: list[beam.PTransform],
    quiet: bool = False,
    meter: Meter | None = None,
) -> None:
    """Run several independent graphs (each applied to the pipeline's start) as one
    pipeline (one job on a remote runner), each under its own label (`name`, or
    `name0000`, `name0001`, ... for several); `meter`: the one their readers count
    into (`run_pipeline`)."""
    pipeline = new_pipeline(options)
    for k, branch in enumerate(branches):
        label = name if len(branches) == 1 else f"{name}{k:04d}"
        _ = pipeline | label >> branch
    run_pipeline(pipeline, quiet, name, meter)
