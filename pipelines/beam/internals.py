"""Whether this Beam's internals are those nmtpipe's forked workers rely on.

`local_runner.py`, `forked_workers.py` and `worker_pool.py` use parts of Beam that it
keeps free to change between releases (`sdk_worker_main` says it has no compatibility
guarantees): the FnApiRunner's hooks and worker handlers, the control and data channels
of a worker, the harness a worker runs. `problem()` checks each, once per process, where
workers are first needed (`options.placement`); where one is not what nmtpipe expects,
nmtpipe uses Beam's own worker processes instead (slower to start, the same outputs)
and says so in one line. CI runs the Beam tests on the lowest and the newest Beam that
pyproject.toml accepts (docs/development.md).

`NMTPIPE_FORKED_WORKERS=0` in the environment forces Beam's own workers, as a probe
that failed would (to compare, or if a Beam release breaks something the probe misses).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable

from nmtpipe.transforms.progress import note

FORCE_OFF = "NMTPIPE_FORKED_WORKERS"


def _parameters(function: Callable) -> list[str]:
    return list(inspect.signature(function).parameters)


def _names(function: Callable) -> set[str]:
    """The attribute and global names `function`'s code uses."""
    code = inspect.unwrap(function).__code__
    return set(code.co_names)


def _checks() -> list[tuple[str, Callable[[], bool]]]:
    """(what is relied on, whether it holds), in the order they are checked."""
    from apache_beam.pipeline import PipelineVisitor
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner, worker_handlers
    from apache_beam.runners.worker import data_plane, sdk_worker, sdk_worker_main

    handler = worker_handlers.GrpcWorkerHandler
    return [
        ("sdk_worker_main.create_harness(environment)",
         lambda: _parameters(sdk_worker_main.create_harness)[:1] == ["environment"]
         and {"SdkHarness", "_load_pipeline_options"} <= _names(sdk_worker_main.create_harness)),
        ("SdkHarness.run", lambda: callable(getattr(sdk_worker.SdkHarness, "run", None))),
        ("FnApiRunner.run_pipeline(pipeline, options)",
         lambda: _parameters(FnApiRunner.run_pipeline)[:3] == ["self", "pipeline", "options"]),
        ("FnApiRunner.run_via_runner_api(pipeline_proto, options)",
         lambda: _parameters(FnApiRunner.run_via_runner_api)[:3]
         == ["self", "pipeline_proto", "options"]),
        ("the FnApiRunner's multi_processing workers as SUBPROCESS_SDK environments",
         lambda: hasattr(python_urns, "SUBPROCESS_SDK")
         and "SubprocessSDKEnvironment" in _names(FnApiRunner.run_pipeline)),
        ("WorkerHandler.register_environment",
         lambda: callable(getattr(worker_handlers.WorkerHandler, "register_environment", None))),
        ("GrpcWorkerHandler(state, provision_info, grpc_server)",
         lambda: _parameters(handler.__init__) == ["self", "state", "provision_info", "grpc_server"]
         and {"control_address", "control_conn", "data_conn"} <= _names(handler.__init__)),
        ("a worker handler's worker_id, provision_info, start_worker, stop_worker, close",
         lambda: {"worker_id", "provision_info"} <= _names(worker_handlers.WorkerHandler.__init__)
         and all(callable(getattr(handler, m, None))
                 for m in ("start_worker", "stop_worker", "close"))),
        ("ControlConnection.abort",
         lambda: callable(getattr(worker_handlers.ControlConnection, "abort", None))),
        ("the data channel's input_elements raising its _exception",
         lambda: "_exception" in _names(data_plane._GrpcDataChannel.input_elements)
         and "_exception" in _names(data_plane._GrpcDataChannel.__init__)),
        ("PipelineVisitor", lambda: callable(getattr(PipelineVisitor, "visit_transform", None))),
    ]  # fmt: skip


@functools.cache
def problem() -> str | None:
    """None when forked workers can be used; else why not, said once as a line."""
    found = f"{FORCE_OFF}=0" if os.environ.get(FORCE_OFF) == "0" else _first_failure()
    if found is None:
        return None
    note(f"nmtpipe: local Beam workers start as Beam starts them, not forked ({found})")
    return found


def _first_failure() -> str | None:
    import apache_beam

    try:
        checks = _checks()
    except (ImportError, AttributeError) as e:
        return f"Beam {apache_beam.__version__}: {type(e).__name__}: {e}"
    for what, holds in checks:
        try:
            if holds():
                continue
        except (AttributeError, TypeError, ValueError):
            pass
        return f"Beam {apache_beam.__version__} changed {what}"
    return None
