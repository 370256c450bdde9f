"""Shared fixtures: a small corpus, an S3 server, a portable runner (helpers: helpers.py);
the suite's order, and its end on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import example_lines, write_pair


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM ends the run as Ctrl-C does, with every fixture's teardown: what the tests
    started in process groups of their own (tests/clusters' network-namespace hosts, their
    JVMs and pools) is stopped, not left running after a terminated run."""
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"terminated by signal {signum}")


# What runs one test at a time, on one worker of the two (pyproject's addopts), in this
# order: the tests whose hosts are network namespaces, then the clusters' tests (a third
# of CI's time, most of it waiting on the engines' JVMs; CI starts the clusters beside
# the suite, and they wait for that start to end).
SERIAL = ("tests/trainers/runtime/test_two_hosts.py", "tests/clusters/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The SERIAL tests first: one worker starts on them while the other runs the rest
    (they skip at once where no cluster runs)."""

    def rank(item: pytest.Item) -> int:
        found = [k for k, prefix in enumerate(SERIAL) if item.nodeid.startswith(prefix)]
        return found[0] if found else len(SERIAL)

    items.sort(key=rank)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scheduling by scope, where the SERIAL tests are one scope (so one worker
    runs them, in order) and every other test a scope of its own. (`--dist loadgroup`
    would say the same with marks, but pytest 9 ignores the node ids xdist 3.8 changes
    for it.) The tests that build nmtpipe's sdist take a lock of their own instead
    (helpers.one_sdist_build_at_a_time): CI's second pytest builds it too."""
    from xdist.scheduler import LoadScopeScheduling

    class SerialFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "serial" if nodeid.startswith(SERIAL) else nodeid

    return SerialFirst(config, log)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> dict[str, str]:
    """A transformer_tiny trained 30 updates on 1 in 12 example pairs, en→zh
    (`helpers.train_tiny_model`)."""
    from tests.helpers import train_tiny_model

    return train_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_backward_model(tmp_path_factory) -> dict[str, str]:
    """The same trained zh→en (a model score's backward model)."""
    from tests.helpers import train_tiny_model

    return train_tiny_model(tmp_path_factory.mktemp("tiny-backward"), ("zh", "en"))


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """300 example pairs as plain files: tmp/corpus/train.{en,zh}."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    en = example_lines("tatoeba-cmn", "en")[::100][:300]
    zh = example_lines("tatoeba-cmn", "zh")[::100][:300]
    return write_pair(folder / "train", en, zh)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1, as s3fs's own test suite runs one."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in _S3_ENV}
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            # botocore reads it for every new client; worker processes inherit it.
            "AWS_ENDPOINT_URL": endpoint,
        }
    )
    os.environ.pop("AWS_PROFILE", None)
    yield endpoint
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


_S3_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
)


@pytest.fixture
def s3(s3_server: str) -> Iterator[str]:
    """An empty bucket `s3://nmtpipe-test` on a freshly reset moto server."""
    import requests
    import s3fs

    requests.post(f"{s3_server}/moto-api/reset", timeout=10)
    s3fs.S3FileSystem.clear_instance_cache()
    s3fs.S3FileSystem().mkdir("nmtpipe-test")
    yield "s3://nmtpipe-test"
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_unreachable(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """S3 at an endpoint that refuses connections: a port on 127.0.0.1 held, unlistened.

    The buckets an earlier test found are forgotten: an S3 filesystem of the same options
    is the same key to fsio's cache, whatever endpoint the environment names."""
    import s3fs

    from nmtpipe.transforms.storage import fsio

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{held.getsockname()[1]}"
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's own retries take seconds
        s3fs.S3FileSystem.clear_instance_cache()
        fsio._look_for_bucket.cache_clear()
        yield endpoint
        s3fs.S3FileSystem.clear_instance_cache()
        fsio._look_for_bucket.cache_clear()


@pytest.fixture
def s3_denied(s3: str, s3_server: str) -> Iterator[str]:
    """A bucket `s3://nmtpipe-denied` that the server then refuses (403) to everyone:
    moto checks credentials, and knows none."""
    import requests
    import s3fs

    s3fs.S3FileSystem().mkdir("nmtpipe-denied")
    requests.post(f"{s3_server}/moto-api/reset-auth", data=b"0", timeout=10)
    try:
        yield "s3://nmtpipe-denied"
    finally:
        requests.post(f"{s3_server}/moto-api/reset-auth", data=b"inf", timeout=10)


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


@pytest.fixture(scope="session")
def portable_runner() -> Iterator[list[str]]:
    """Beam's local job service plus an EXTERNAL worker pool (nmtpipe's, as on a
    cluster), as separate processes.

    This is the path Flink and Spark submissions take: the pipeline is serialised,
    submitted over gRPC and run by SDK workers in other processes.
    """
    job_port, pool_port = _free_port(), _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", module, flag, str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for module, flag, port in (
            ("apache_beam.runners.portability.local_job_service_main", "--port", job_port),
            ("nmtpipe.pipelines.beam.worker_pool", "--port", pool_port),
        )
    ]
    try:
        _wait_for_port(job_port, procs[0])
        _wait_for_port(pool_port, procs[1])
        yield [
            "--runner=PortableRunner",
            f"--job_endpoint=127.0.0.1:{job_port}",
            "--environment_type=EXTERNAL",
            f"--environment_config=127.0.0.1:{pool_port}",
        ]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
