"""Beam's FnApiRunner with its worker processes forked, not started as new interpreters.

With `--direct_running_mode=multi_processing` Beam's FnApiRunner starts each worker as
`python -m apache_beam.runners.worker.sdk_worker_main`, and each spends about 1.9
CPU-seconds importing Beam and nmtpipe's steps: on two cores, about 2 s of every local
multi-process run before any work (benchmarks/RESULTS.md). `LocalRunner` is that runner
with the workers forked from `forked_workers`' fork server instead, which it asks, as it
starts, to import the modules of the pipeline's transforms (`pipeline_modules`). A
worker is the same harness with the same pipeline options; the graph and its outputs
are unchanged. It relies on Beam internals that `internals.py` checks first: where they
differ, `options.placement` picks Beam's own workers instead.

A worker that dies must end the run, not hang it: Beam's runner waits forever for the
answer of a worker that died before it connected (killed for memory, a failed import, a
crash while starting), and reports one that dies later as `Channel closed prematurely`,
which says nothing of why. Here the first worker of a run that ends badly stops the
run's other workers and fails the dead worker's channels with a `RunnerError` naming
its exit code, so the runner fails in whatever thread runs it (nmtpipe called from a
thread of a program too); the run's error is then that line. Once the runner has
closed a worker's channels, the worker has `CLOSE_GRACE_SECONDS` to exit before it is
killed (a worker held by a thread that never ends hung CI twice, after the job had
already ended).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import uuid
from collections.abc import Iterator
from types import FrameType

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import python_urns
from apache_beam.runners.portability.fn_api_runner import FnApiRunner, worker_handlers
from google.protobuf import json_format

from nmtpipe.pipelines.beam.forked_workers import End, ServerEnded, Worker, forks, sdk_worker
from nmtpipe.transforms.errors import RunnerError, Terminated

# The environment of the forked workers: the runner's own for multi_processing, renamed;
# its payload names the run (`_Run`).
FORKED = "nmtpipe:env:forked_sdk_worker:v1"
# How long a worker may take to exit once the runner has closed its channels (they exit
# within a second when all is well).
CLOSE_GRACE_SECONDS = 10.0


def worker_death(end: End) -> str:
    """The line a user reads when a local worker ended so while its run needed it."""
    if end.code is None:
        how = "ended" if end.server is None else f"ended ({_exit_text(end.server)})"
        return (
            f"nmtpipe's fork server of local Beam workers {how} before the job did, and "
            "its workers with it; nothing was committed: run the command again"
        )
    return (
        f"a Beam worker process on this machine ended (return code {_exit_text(end.code)})"
        " before the job did; nothing was committed (run again with --verbose to see its"
        " output)"
    )


def _exit_text(code: int) -> str:
    """`3`, `-9, killed by SIGKILL: out of memory?`, `-15, killed by SIGTERM`."""
    said = str(code)
    if code < 0:
        with contextlib.suppress(ValueError):
            said += f", killed by {signal.Signals(-code).name}"
            if -code == signal.SIGKILL:
                said += ": out of memory?"
    return said


class _Run:
    """One run's forked workers, and the first of them to end while the run needed it."""

    def __init__(self) -> None:
        self.handlers: list[ForkedWorkerHandler] = []
        self.death: End | None = None
        self._lock = threading.Lock()

    @property
    def workers(self) -> list[Worker]:
        return [h.worker for h in self.handlers if h.worker is not None]

    def started(self, handler: ForkedWorkerHandler) -> None:
        with self._lock:
            self.handlers.append(handler)

    def ended(self, handler: ForkedWorkerHandler, worker: Worker) -> None:
        """`worker` ended: unless the runner or nmtpipe ended it, or it exited cleanly,
        the first such end stops the others and fails the run (the waits on every
        worker of it: a bundle may wait on one that never connected)."""
        if worker.stopped or handler.closing or (worker.end is not None and worker.end.clean):
            return
        with self._lock:
            if self.death is not None:
                return
            self.death = worker.end
            handlers = list(self.handlers)
        error = RunnerError(worker_death(self.death))
        for each in handlers:
            each.fail(error)
        forks().stop([w for w in self.workers if w is not worker], timeout=0)


_runs: dict[bytes, _Run] = {}


@worker_handlers.WorkerHandler.register_environment(FORKED, bytes)
class ForkedWorkerHandler(worker_handlers.GrpcWorkerHandler):
    """One worker process of a local run, forked; the runner talks to it over gRPC as
    to Beam's own subprocess workers."""

    def __init__(
        self,
        payload: bytes,
        state: worker_handlers.StateServicer,
        provision_info: object,
        grpc_server: worker_handlers.GrpcServer,
    ) -> None:
        super().__init__(state, provision_info, grpc_server)
        self._run = _runs[payload]
        self.worker: Worker | None = None
        self.closing = False  # from then on, the worker's end is the runner's doing

    def start_worker(self) -> None:
        options = json_format.MessageToJson(self.provision_info.provision_info.pipeline_options)
        self._run.started(self)  # (first: a worker can end before `start` returns)
        try:
            self.worker = forks().start(
                sdk_worker, self.control_address, self.worker_id, options,
                name=f"worker {self.worker_id}", on_end=lambda w: self._run.ended(self, w),
            )  # fmt: skip
        except ServerEnded as e:
            raise RunnerError(worker_death(End(None, e.code))) from e

    def fail(self, error: RunnerError) -> None:
        """Make the runner's waits on this worker fail with `error`: what it asked and
        waits for, and the data it waits for (checked every second)."""
        self.control_conn.abort(error)
        self.data_conn._exception = error

    def close(self) -> None:
        self.closing = True
        super().close()

    def stop_worker(self) -> None:
        if self.worker is not None and not self.worker.join(CLOSE_GRACE_SECONDS):
            self.worker.kill()


def pipeline_modules(pipeline: beam.Pipeline) -> set[str]:
    """The modules of the transforms `pipeline` holds and of their DoFns and
    CombineFns: what its workers unpickle (for the fork server to import first)."""
    modules: set[str] = set()

    class Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node: beam.pipeline.AppliedPTransform) -> None:
            self.enter_composite_transform(node)

        def enter_composite_transform(self, node: beam.pipeline.AppliedPTransform) -> None:
            transform = node.transform
            if transform is None:
                return
            modules.add(type(transform).__module__)
            for part in ("fn", "combine_fn", "dofn"):
                inner = getattr(transform, part, None)
                if inner is not None:
                    modules.add(type(inner).__module__)

    pipeline.visit(Visitor())
    return modules - {"__main__", "builtins"}  # (the main module's are pickled by value)


class LocalRunner(FnApiRunner):
    """Beam's FnApiRunner; in multi_processing mode its workers are forked."""

    def run_pipeline(self, pipeline: beam.Pipeline, options: PipelineOptions):  # type: ignore[override]
        forks().preload(pipeline_modules(pipeline))
        return super().run_pipeline(pipeline, options)

    def run_via_runner_api(self, pipeline_proto, options):  # type: ignore[override]
        run, key = _Run(), uuid.uuid4().hex.encode()
        for environment in pipeline_proto.components.environments.values():
            if environment.urn == python_urns.SUBPROCESS_SDK:
                environment.urn, environment.payload = FORKED, key
        _runs[key] = run
        try:
            return super().run_via_runner_api(pipeline_proto, options)
        except BaseException as exc:
            forks().stop(run.workers, timeout=0)
            if run.death is not None and not isinstance(exc, KeyboardInterrupt):
                raise RunnerError(worker_death(run.death)) from exc
            raise
        finally:
            del _runs[key]


@contextlib.contextmanager
def interrupt_kills_workers() -> Iterator[None]:
    """While open, Ctrl-C (SIGINT) kills this process's forked workers at once, quietly,
    before it interrupts the main thread (Beam would otherwise let each finish its
    bundle first). Off the main thread, where no handler can be installed, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        forks().stop(timeout=0)
        raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    # SIGTERM likewise where the command takes it as Ctrl-C (`cli/main.py`'s `entry`).
    takes_term = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    previous_term = signal.signal(signal.SIGTERM, interrupt) if takes_term else None
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
