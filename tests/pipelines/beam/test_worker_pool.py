"""nmtpipe's worker pool: a stop for a worker id kills no worker (the ids repeat across
TaskManagers and stage environments), the pool's end ends them all. The pool running
real jobs is in the tests that use the `portable_runner` fixture and in tests/clusters."""

from __future__ import annotations

import time

from apache_beam.portability.api import beam_fn_api_pb2, endpoints_pb2

from nmtpipe.pipelines.beam.worker_pool import WorkerPool


def start(pool: WorkerPool, worker_id: str) -> None:
    # Nothing listens there: the worker waits to connect until it is ended.
    endpoint = endpoints_pb2.ApiServiceDescriptor(url="localhost:1")
    request = beam_fn_api_pb2.StartWorkerRequest(worker_id=worker_id, control_endpoint=endpoint)
    assert pool.StartWorker(request, None).error == ""


def test_a_stop_kills_no_worker_and_the_pools_end_ends_them_all():
    pool = WorkerPool()
    try:
        start(pool, "1-1")
        start(pool, "1-1")  # another TaskManager's, or the next stage environment's
        workers = pool.workers
        pool.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id="1-1"), None)
        time.sleep(0.5)
        assert [w.is_alive() for w in workers] == [True, True]
    finally:
        pool.stop_all()
    assert [w.is_alive() for w in workers] == [False, False]
