"""Beam options as nmtpipe passes them: validation, defaults, Dataflow/Flink submission."""

from __future__ import annotations

import os
import tarfile
import threading

import pytest
from apache_beam.options.pipeline_options import (
    DirectOptions,
    FlinkRunnerOptions,
    GoogleCloudOptions,
    PortableOptions,
    SetupOptions,
    StandardOptions,
)
from apache_beam.runners.portability.stager import Stager
from apache_beam.runners.runner import PipelineState

from nmtpipe.pipelines.beam.options import (
    IN_PROCESS_BYTES,
    check_beam_args,
    describe,
    in_process,
    pipeline_options,
    worker_cores,
)
from nmtpipe.pipelines.workflow.run_config import RefreshSettings
from nmtpipe.transforms.errors import ConfigError
from tests.helpers import one_sdist_build_at_a_time

DATAFLOW = [
    "--runner=DataflowRunner",
    "--project=my-project",
    "--region=europe-west4",
    "--temp_location=gs://my-bucket/tmp",
]


def test_local_defaults_one_worker_process_per_core():
    options = pipeline_options([])
    assert options.view_as(StandardOptions).runner == "FnApiRunner"
    direct = options.view_as(DirectOptions)
    assert direct.direct_num_workers == (os.cpu_count() or 1)
    assert direct.direct_running_mode == "multi_processing"
    mine = pipeline_options(["--direct_num_workers=3", "--direct_running_mode=in_memory"])
    assert mine.view_as(DirectOptions).direct_num_workers == 3


def test_local_mode_chosen_by_input_size_unless_the_user_chose():
    small = pipeline_options([], input_bytes=IN_PROCESS_BYTES)
    direct = small.view_as(DirectOptions)
    assert (direct.direct_running_mode, direct.direct_num_workers) == ("in_memory", 1)
    assert describe(small, 3_400_000) == "FnApiRunner (in-process, 3 MB input)"
    large = pipeline_options([], input_bytes=IN_PROCESS_BYTES + 1)
    assert large.view_as(DirectOptions).direct_running_mode == "multi_processing"
    workers = os.cpu_count() or 1
    assert describe(large, 107_000_000) == f"FnApiRunner ({workers} worker processes, 107 MB input)"
    assert (
        describe(pipeline_options([], input_bytes=5), 5) == "FnApiRunner (in-process, 0.0 MB input)"
    )
    # The user's own choice wins, either way; so does a smaller threshold.
    for flags in (["--direct_running_mode=multi_processing"], ["--direct_num_workers=2"]):
        chosen = pipeline_options(flags, input_bytes=1).view_as(DirectOptions)
        assert chosen.direct_running_mode == "multi_processing"
    threads = pipeline_options(["--direct_running_mode=multi_threading"], input_bytes=1)
    assert describe(threads) == f"FnApiRunner ({workers} worker threads)"
    forced = pipeline_options([], input_bytes=1, in_process_bytes=0)
    assert forced.view_as(DirectOptions).direct_running_mode == "multi_processing"
    assert describe(pipeline_options(DATAFLOW), 10**9) == "DataflowRunner"


def test_one_threshold_says_what_is_small_enough_for_this_process():
    assert in_process(IN_PROCESS_BYTES) and not in_process(IN_PROCESS_BYTES + 1)
    assert not in_process(None)  # a size not known is never small
    assert in_process(0, 0) and not in_process(1, 0)  # a caller's own limit
    assert RefreshSettings().in_process_bytes is None  # a refresh's default: the same one


def test_work_that_keeps_several_cores_busy_gets_fewer_processes(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    large = 10**12
    four = pipeline_options([], input_bytes=large, cores_per_worker=2)
    direct = four.view_as(DirectOptions)
    assert (direct.direct_running_mode, direct.direct_num_workers) == ("multi_processing", 4)
    assert worker_cores(four) == 2
    one = pipeline_options([], input_bytes=large, cores_per_worker=8)
    assert describe(one) == "FnApiRunner (in-process)" and worker_cores(one) == 8
    assert worker_cores(pipeline_options([], input_bytes=large)) == 1  # a process per core
    threads = pipeline_options(["--direct_running_mode=multi_threading", "--direct_num_workers=2"])
    assert worker_cores(threads) == 4
    assert worker_cores(pipeline_options(DATAFLOW)) == 1  # its workers run one per core


def test_unknown_and_malformed_options():
    with pytest.raises(ConfigError, match=r"unknown option.*--runnner"):
        check_beam_args(["--runnner=FnApiRunner"])
    with pytest.raises(ConfigError, match="Beam option: argument --direct_num_workers"):
        pipeline_options(["--direct_num_workers=many"])


def test_dataflow_options_and_worker_package_without_submitting(tmp_path):
    options = pipeline_options([*DATAFLOW, "--staging_location=gs://my-bucket/staging"])
    gcp = options.view_as(GoogleCloudOptions)
    assert (gcp.project, gcp.region, gcp.temp_location) == (
        "my-project",
        "europe-west4",
        "gs://my-bucket/tmp",
    )
    setup_file = options.view_as(SetupOptions).setup_file
    assert setup_file.endswith("pyproject.toml")
    # What Dataflow would upload: an sdist of nmtpipe built from pyproject.toml, staged
    # as workflow.tar.gz for the workers to pip-install.
    with one_sdist_build_at_a_time():
        resources = Stager.create_job_resources(options, str(tmp_path))
    staged = [r for r in resources if b"workflow.tar.gz" in r.role_payload]
    assert len(staged) == 1
    (sdist_path,) = tmp_path.glob("nmtpipe-*.tar.gz")
    with tarfile.open(sdist_path) as sdist:
        members = sdist.getnames()
    for needed in (
        "nmtpipe/__init__.py",
        "transforms/text/clean.py",
        "pipelines/workflow/prepare.py",
        "pipelines/example/tatoeba-cmn.en.gz",
        "pyproject.toml",
    ):
        assert any(m.endswith(needed) for m in members), needed


def test_dataflow_needs_its_options_and_an_explicit_image_skips_packaging():
    with pytest.raises(ConfigError, match="needs --project, --temp_location"):
        pipeline_options(["--runner=DataflowRunner", "--region=r"])
    with pytest.raises(ConfigError, match="must be a gs:// URL"):
        pipeline_options([*DATAFLOW[:3], "--temp_location=/tmp/x"])
    image = pipeline_options([*DATAFLOW, "--sdk_container_image=eu.gcr.io/p/nmtpipe:1"])
    assert image.view_as(SetupOptions).setup_file is None


def test_flink_options_pass_through():
    options = pipeline_options(
        ["--runner=FlinkRunner", "--flink_master=flink:8081", "--environment_type=LOOPBACK"]
    )
    assert options.view_as(FlinkRunnerOptions).flink_master == "flink:8081"
    assert options.view_as(PortableOptions).environment_type == "LOOPBACK"
    assert options.view_as(SetupOptions).setup_file is None  # workers are this process
    docker = pipeline_options(["--runner=FlinkRunner", "--flink_master=flink:8081"])
    assert docker.view_as(SetupOptions).setup_file.endswith("pyproject.toml")


def test_running_on_dataflow_without_the_gcp_extras_says_what_to_install(monkeypatch):
    from types import SimpleNamespace

    from nmtpipe.pipelines.beam import options as beam_options

    monkeypatch.setattr(beam_options, "_installed", lambda module: False)
    # Not a real Pipeline: building one for Dataflow would look for GCP credentials.
    pipeline = SimpleNamespace(options=pipeline_options(DATAFLOW))
    with pytest.raises(ConfigError, match=r"pip install 'nmtpipe\[dataflow\]'"):
        beam_options.run_pipeline(pipeline)


FLINK_FAILURE = (
    "Pipeline BeamApp-root-1126105414-2cd5d87b_e443 failed in state FAILED: "
    "java.io.IOException: Insufficient number of network buffers: required 512, but only "
    "453 available."
)


def _failing_pipeline(message: str):
    from types import SimpleNamespace

    def run():
        raise RuntimeError(message)

    options = pipeline_options(["--runner=PortableRunner", "--job_endpoint=localhost:8099"])
    return SimpleNamespace(options=options, run=run)


def test_a_job_the_engine_failed_is_one_line_naming_the_engines_error():
    """As Flink failed prepare's job when its TaskManager had too few network buffers."""
    from nmtpipe.pipelines.beam.options import run_pipeline
    from nmtpipe.pipelines.cli.logs import error_line
    from nmtpipe.transforms.errors import RunnerError

    with pytest.raises(RunnerError) as failed:
        run_pipeline(_failing_pipeline(FLINK_FAILURE + "\n\tat org.apache.flink..."))
    assert error_line("prepare", failed.value, verbose=False) == (
        "nmtpipe prepare: error: the Beam job failed on PortableRunner: java.io.IOException: "
        "Insufficient number of network buffers: required 512, but only 453 available. "
        "(job BeamApp-root-1126105414-2cd5d87b_e443)",
        1,
    )


@pytest.mark.parametrize(
    "worker_failure",
    [  # nmtpipe's own error raised in a worker; a bug of nmtpipe's in a worker
        "Pipeline B failed in state FAILED: InputError: a.en:3: not UTF-8 [while running 'X']",
        "Pipeline B failed in state FAILED: Traceback (most recent call last):\n  File ...",
    ],
)
def test_a_job_that_nmtpipes_code_failed_is_not_blamed_on_the_engine(worker_failure):
    from nmtpipe.pipelines.beam.options import run_pipeline
    from nmtpipe.transforms.errors import RunnerError

    with pytest.raises(RuntimeError) as failed:
        run_pipeline(_failing_pipeline(worker_failure))
    assert not isinstance(failed.value, RunnerError)


def test_job_deadline_is_a_beam_option_of_nmtpipes_own():
    from nmtpipe.pipelines.beam.options import NmtpipeOptions

    assert pipeline_options([]).view_as(NmtpipeOptions).job_deadline == 12 * 3600
    given = pipeline_options(
        ["--runner=PortableRunner", "--job_endpoint=x:8099", "--job_deadline=90m"]
    )
    assert given.view_as(NmtpipeOptions).job_deadline == 5400
    for value, said in (("soon", "wants a duration like 90s, 30m or 6h, not 'soon'"),
                        ("0", "must be more than zero")):  # fmt: skip
        with pytest.raises(ConfigError) as bad:
            pipeline_options([f"--job_deadline={value}"])
        assert str(bad.value) == f"Beam option: argument --job_deadline: {said}"


class _Unfinished:
    """A PipelineResult whose job never ends (an engine waiting for its lost workers)."""

    def __init__(self, cancel_error: Exception | None = None) -> None:
        self.waited: list[float | None] = []
        self.cancelled = False
        self.cancel_error = cancel_error

    def wait_until_finish(self, duration: float | None = None) -> str:
        self.waited.append(duration)
        return PipelineState.RUNNING

    def cancel(self) -> None:
        self.cancelled = True
        if self.cancel_error is not None:
            raise self.cancel_error


def _unfinished_pipeline(result: _Unfinished, *args: str):
    from types import SimpleNamespace

    return SimpleNamespace(options=pipeline_options(list(args)), run=lambda: result)


REMOTE = ["--runner=PortableRunner", "--job_endpoint=localhost:8099"]


def test_a_remote_job_past_its_deadline_is_cancelled_and_one_line():
    """As a job on Spark whose only worker died waits for an executor."""
    from nmtpipe.pipelines.beam.options import run_pipeline
    from nmtpipe.pipelines.cli.logs import error_line
    from nmtpipe.transforms.errors import RunnerError

    result = _Unfinished()
    with pytest.raises(RunnerError) as late:
        run_pipeline(_unfinished_pipeline(result, *REMOTE, "--job_deadline=2h"))
    assert result.waited == [2 * 3600 * 1000] and result.cancelled  # Beam's milliseconds
    assert error_line("prepare", late.value, verbose=False) == (
        "nmtpipe prepare: error: the Beam job on PortableRunner did not finish within 2h "
        "(--job_deadline); it was cancelled and nothing was committed. A remote engine that "
        "lost its workers waits for them: check the cluster's workers",
        1,
    )
    stuck = _Unfinished(RuntimeError("StatusCode.UNAVAILABLE: failed to connect\nat ..."))
    with pytest.raises(RunnerError) as late:
        run_pipeline(_unfinished_pipeline(stuck, *REMOTE, "--job_deadline=90"))
    assert str(late.value) == (
        "the Beam job on PortableRunner did not finish within 90s (--job_deadline); cancelling "
        "it failed (RuntimeError: StatusCode.UNAVAILABLE: failed to connect), so cancel it on "
        "the cluster, and nothing was committed. A remote engine that lost its workers waits "
        "for them: check the cluster's workers"
    )


def test_a_local_job_has_no_deadline():
    from nmtpipe.pipelines.beam.options import run_pipeline

    class Finished(_Unfinished):
        def wait_until_finish(self, duration: float | None = None) -> str:
            self.waited.append(duration)
            return PipelineState.DONE

    result = Finished()
    run_pipeline(_unfinished_pipeline(result, "--runner=FnApiRunner", "--job_deadline=1s"))
    assert result.waited == [None] and not result.cancelled


_RELEASE = threading.Event()


def _held(x: int) -> int:
    _RELEASE.wait(60)
    return x


def test_a_real_portable_job_past_its_deadline_is_cancelled():
    """Beam's own PortableRunner (its embedded job service, workers in this process)
    returns RUNNING when the wait's duration passes, as the fakes above assume."""
    import apache_beam as beam

    from nmtpipe.pipelines.beam.options import run_pipeline
    from nmtpipe.transforms.errors import RunnerError

    options = pipeline_options(
        ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK",
         "--job_deadline=1s"]
    )  # fmt: skip
    pipeline = beam.Pipeline(options=options)
    _ = pipeline | beam.Create([1]) | beam.Map(_held)
    try:
        with pytest.raises(RunnerError, match=r"did not finish within 1s .* it was cancelled"):
            run_pipeline(pipeline)
    finally:
        _RELEASE.set()


def test_a_step_past_its_deadline_commits_nothing(tmp_path, monkeypatch, capsys):
    """The step's commit follows its pipeline's run: a job given up commits nothing."""
    import apache_beam as beam

    from nmtpipe.pipelines.cli.main import main

    monkeypatch.setattr(beam.Pipeline, "run", lambda self: _Unfinished())
    output = tmp_path / "prepared"
    args = ["prepare", "--example", "--output", str(output), *REMOTE, "--job_deadline=5m"]
    assert main(args) == 1
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith(
            "nmtpipe prepare: error: the Beam job on PortableRunner did not finish within 5m "
        )
    )
    assert not (output / "manifest.json").exists()
