"""Beam's FnApiRunner with its worker processes forked, not started as new interpreters.

With `--direct_running_mode=multi_processing` Beam's FnApiRunner starts each worker as
`python -m apache_beam.runners.worker.sdk_worker_main`, and each spends about 1.9
CPU-seconds importing Beam and nmtpipe's steps: on two cores, about 2 s of every local
multi-process run before any work (benchmarks/RESULTS.md, issue 41). `LocalRunner` is
that runner with the workers forked from `forked_workers`' fork server instead, which
the command starts first thing, or the step as soon as it knows its run needs workers,
so that its imports run beside the driver's own. A worker is the same harness with the
same pipeline options; the graph and its outputs are unchanged.

Its worker handler also bounds the end of a run: once the runner has closed a worker's
channels, the worker has `CLOSE_GRACE_SECONDS` to exit before it is killed (a worker
held by a thread that never ends hung CI twice, after the job had already ended), and
it tells `worker_watch` when a worker ends badly while the run needs it.
"""

from __future__ import annotations

import threading

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import FnApiRunner, worker_handlers
from apache_beam.runners.portability.fn_api_runner.fn_runner import (
    ExtendedProvisionInfo,
    RunnerResult,
)
from google.protobuf import json_format

from nmtpipe.pipelines.beam import worker_watch
from nmtpipe.pipelines.beam.forked_workers import FORKS, Worker, sdk_worker

# The environment of the forked workers: the runner's own for multi_processing, renamed.
FORKED = "nmtpipe:env:forked_sdk_worker:v1"
# How long a worker may take to exit once the runner has closed its channels (they exit
# within a second when all is well).
CLOSE_GRACE_SECONDS = 10.0


@worker_handlers.WorkerHandler.register_environment(FORKED, bytes)
class ForkedWorkerHandler(worker_handlers.GrpcWorkerHandler):
    """One worker process of a local run, forked; the runner talks to it over gRPC as
    to Beam's own subprocess workers."""

    def __init__(
        self,
        payload: bytes,
        state: worker_handlers.StateServicer,
        provision_info: ExtendedProvisionInfo,
        grpc_server: worker_handlers.GrpcServer,
    ) -> None:
        super().__init__(state, provision_info, grpc_server)
        self._worker: Worker | None = None
        self._closing = threading.Event()

    def start_worker(self) -> None:
        options = json_format.MessageToJson(self.provision_info.provision_info.pipeline_options)
        self._worker = FORKS.start(
            sdk_worker, self.control_address, self.worker_id, options,
            name=f"worker {self.worker_id}", on_end=self._ended,
        )  # fmt: skip

    def _ended(self, code: int) -> None:
        if not self._closing.is_set():
            worker_watch.worker_ended(code)

    def close(self) -> None:
        self._closing.set()  # from here on, the worker's end is the runner's doing
        super().close()

    def stop_worker(self) -> None:
        if self._worker is not None and not self._worker.join(CLOSE_GRACE_SECONDS):
            self._worker.kill()


class LocalRunner(FnApiRunner):
    """Beam's FnApiRunner; in multi_processing mode its workers are forked."""

    def run_via_runner_api(
        self, pipeline_proto: beam_runner_api_pb2.Pipeline, options: PipelineOptions
    ) -> RunnerResult:
        for environment in pipeline_proto.components.environments.values():
            if environment.urn == python_urns.SUBPROCESS_SDK:
                environment.urn, environment.payload = FORKED, b""
        return super().run_via_runner_api(pipeline_proto, options)
