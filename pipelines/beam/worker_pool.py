"""nmtpipe's Beam worker pool, for `--environment_type=EXTERNAL`: run one beside the
TaskManagers or Spark workers of each host, in the environment where nmtpipe is
installed (`python -m nmtpipe.pipelines.beam.worker_pool --port 50000`).

A TaskManager or executor asks the pool on its host for an SDK worker process each time
it sets up an environment for a stage, and tells it to stop that worker when it lets the
environment go. Beam's own pool (`apache_beam.runners.worker.worker_pool_main`) kills
the process it started under the worker id named. But each TaskManager and each stage's
environment counts its worker ids from the same start ("1-1", "2-1", ...): a stop for one
environment killed another's live worker, and the step failed (Flink, two TaskManagers
sharing one pool, and one TaskManager whose stages set up environments in turn; the job
ended with "CANCELLED: client cancelled"). Here a stop kills nothing: a worker ends by
itself when its runner closes the control channel, as every environment's release does,
or when that channel breaks because the runner died. The pool's own end (SIGTERM,
SIGINT) ends every worker it started.

Workers are forked from `forked_workers`' fork server, started before the pool serves
(a prepare job starts one per stage and slot: 16 to 34 of them on the clusters of
benchmarks/RESULTS.md). Where this Beam's internals differ from what forking relies on
(`internals.py`), each is started as Beam's own pool starts one, a new interpreter
running `apache_beam.runners.worker.sdk_worker_main`. They write to the pool's stderr,
and keep malloc to two arenas as nmtpipe's local workers do.
"""

from __future__ import annotations

import argparse
import logging
import os
import pkgutil
import signal
import subprocess
import sys
import threading
from concurrent import futures

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc

from nmtpipe.pipelines.beam import internals, malloc_arenas
from nmtpipe.pipelines.beam.forked_workers import HARNESS, Worker, forks, sdk_worker

_LOG = logging.getLogger("nmtpipe.worker_pool")


def step_modules() -> list[str]:
    """Every module of `transforms.beam`, where the steps' DoFns live: what a forked
    worker unpickles, before the pool knows which steps its jobs run."""
    from nmtpipe.transforms import beam as steps

    return [f"{steps.__name__}.{m.name}" for m in pkgutil.iter_modules(steps.__path__)]


class WorkerPool(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    """Starts an SDK worker process per request; stops none (see the module)."""

    def __init__(self) -> None:
        self.forked = internals.problem() is None
        self._started: list[subprocess.Popen] = []

    def StartWorker(
        self, request: beam_fn_api_pb2.StartWorkerRequest, context: object
    ) -> beam_fn_api_pb2.StartWorkerResponse:
        control, worker_id = request.control_endpoint.url, request.worker_id
        try:
            if self.forked:
                pid = forks().start(sdk_worker, control, worker_id, name=f"worker {worker_id}").pid
            else:
                pid = self._start_as_beam_does(request)
        except OSError as e:
            return beam_fn_api_pb2.StartWorkerResponse(error=f"cannot start a worker: {e}")
        _LOG.info("started worker %s (pid %d) for %s", worker_id, pid, control)
        return beam_fn_api_pb2.StartWorkerResponse()

    def _start_as_beam_does(self, request: beam_fn_api_pb2.StartWorkerRequest) -> int:
        """A worker as a new interpreter, given its endpoints as Beam's pool gives them."""
        environment = {
            **os.environ,
            "CONTROL_API_SERVICE_DESCRIPTOR": str(request.control_endpoint),
            "PIPELINE_OPTIONS": "{}",
            "WORKER_ID": request.worker_id,
        }
        worker = subprocess.Popen([sys.executable, "-m", HARNESS], env=environment,
                                  stdout=sys.stderr.fileno())  # fmt: skip
        self._started = [w for w in self._started if w.poll() is None] + [worker]
        return worker.pid

    def StopWorker(
        self, request: beam_fn_api_pb2.StopWorkerRequest, context: object
    ) -> beam_fn_api_pb2.StopWorkerResponse:
        _LOG.info("worker %s released: it ends with its control channel", request.worker_id)
        return beam_fn_api_pb2.StopWorkerResponse()

    @property
    def workers(self) -> list[Worker]:
        """The forked workers started and not yet seen ending."""
        return forks().alive()

    def warm_up(self) -> None:
        """Starts the fork server (and its imports) now, not with the first worker."""
        if self.forked:
            forks().preload(step_modules())

    def stop_all(self) -> None:
        forks().stop()
        for worker in self._started:
            worker.terminate()
        for worker in self._started:
            worker.wait()


def serve(port: int) -> None:
    """Serves on every address at `port` until SIGTERM or SIGINT."""
    malloc_arenas.limit_arenas()  # the fork server, hence the workers, inherit it
    pool = WorkerPool()
    pool.warm_up()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.add_insecure_port(f"[::]:{port}")
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    server.start()
    _LOG.info("listening for workers at port %d", port)
    done.wait()
    server.stop(grace=None)
    pool.stop_all()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m nmtpipe.pipelines.beam.worker_pool",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--port", type=int, default=50000, help="default: 50000")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    serve(args.port)


if __name__ == "__main__":
    main()
