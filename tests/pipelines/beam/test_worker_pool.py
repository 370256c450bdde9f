"""nmtpipe's worker pool: a stop for a worker id kills no worker (the ids repeat across
TaskManagers and stage environments), the pool's end ends them all. The pool running
real jobs is in the tests that use the `portable_runner` fixture and in tests/clusters.

The pool runs in a process of its own: its fork server would outlive it in this one."""

from __future__ import annotations

import subprocess
import sys

POOL = """
import time
from apache_beam.portability.api import beam_fn_api_pb2, endpoints_pb2
from nmtpipe.pipelines.beam.worker_pool import WorkerPool

pool = WorkerPool()
# Nothing listens there: each worker waits to connect until it is ended.
endpoint = endpoints_pb2.ApiServiceDescriptor(url="localhost:1")
for _ in range(2):  # the same id: another TaskManager's, or the next stage environment's
    request = beam_fn_api_pb2.StartWorkerRequest(worker_id="1-1", control_endpoint=endpoint)
    assert pool.StartWorker(request, None).error == ""
workers = pool.workers
pool.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id="1-1"), None)
time.sleep(0.5)
print([w.is_alive() for w in workers])
pool.stop_all()
print([w.is_alive() for w in workers])
"""


def test_a_stop_kills_no_worker_and_the_pools_end_ends_them_all():
    done = subprocess.run([sys.executable, "-c", POOL], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[True, True]", "[False, False]"]
