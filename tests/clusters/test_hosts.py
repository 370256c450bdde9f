"""nmtpipe's Beam steps on a cluster of three hosts (`namespace_cluster.py`: the head and
S3 on the first, a worker beside a worker pool on each other), the data in object
storage. Every step reads s3:// and writes s3://, and commits the FnApiRunner's bytes;
both worker hosts' pools start the SDK workers; a worker host lost in the middle of
prepare ends the step in one line with nothing committed (Flink) or is made up for by
the other (Spark), and the rerun commits the same bytes.

Each cluster costs ~1 min to start and ~10-25 s per Beam job, so the corpus is small and
the steps few.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import netns
from tests.clusters.conftest import ENGINES
from tests.clusters.namespace_cluster import (
    BUCKET,
    STARTED_WORKER,
    Hosts,
    StartFailed,
    namespace_cluster,
    nmtpipe,
)
from tests.clusters.test_engines import BAD, EN, ZH

pytestmark = pytest.mark.slow
# A job that hangs ends in a line, not in the test's timeout.
DEADLINE = ["--job_deadline", "5m"]


@pytest.fixture(scope="module", params=ENGINES)
def hosts(request, tmp_path_factory) -> Iterator[Hosts]:
    why = netns.unavailable()
    if why is not None:
        pytest.skip(f"several hosts need network namespaces: {why}")
    try:
        with namespace_cluster(request.param, tmp_path_factory.mktemp("hosts")) as cluster:
            write_corpus(cluster, tmp_path_factory.mktemp("raw"))
            yield cluster
    except StartFailed as e:
        # Where no job server can be had (Beam's shaded jar refused and no Maven to
        # assemble one), a skip that says so (a failure in CI: conftest.py); any other
        # failure to start is the test's.
        if f"no {request.param} job server" not in str(e):
            raise
        pytest.skip(str(e).splitlines()[-1])


def write_corpus(cluster: Hosts, folder: Path) -> None:
    """The raw corpus, with a line for each reason prepare rejects a pair, in S3 (written
    here, copied there from the head: the hosts share this machine's files)."""
    src, tgt = [*EN, *(s for s, _ in BAD)], [*ZH, *(t for _, t in BAD)]
    for lang, side in (("en", src), ("zh", tgt)):
        (folder / f"train.{lang}").write_text("\n".join(side) + "\n", encoding="utf-8")
    cluster.python(
        "import s3fs\n"
        "for lang in ('en', 'zh'):\n"
        f"    s3fs.S3FileSystem().put_file(f'{folder}/train.{{lang}}', "
        f"f'{BUCKET}/raw/train.{{lang}}')\n"
    )


def digests(cluster: Hosts, url: str) -> dict[str, str]:
    """path → sha256 of every file a step committed at `url`, as its manifest lists them."""
    code = (
        "import json, fsspec\n"
        f"doc = json.loads(fsspec.open('{url}/manifest.json').open().read())\n"
        "print(json.dumps({f['path']: f['sha256'] for f in doc['files']}))"
    )
    return json.loads(cluster.python(code))


def exists(cluster: Hosts, url: str) -> bool:
    return cluster.python(f"import fsspec; print(fsspec.open('{url}').fs.exists('{url}'))") == (
        "True\n"
    )


PREPARE = ["prepare", "--src-lang", "en", "--tgt-lang", "zh", "--trainpref", f"{BUCKET}/raw/train",
           "--valid-fraction", "0.03", "--test-fraction", "0.03"]  # fmt: skip


def steps(root: str) -> list[tuple[str, list[str]]]:
    """(output, the command's words) of each step, in order, all in object storage."""
    return [
        (f"{root}/prepared", [*PREPARE, "--output", f"{root}/prepared"]),
        (f"{root}/t2t", ["vocab", "--prepared", f"{root}/prepared", "--output", f"{root}/t2t",
                         "--model", "t2t", "--vocab-size", "1000", "--joined"]),
        (f"{root}/unigram", ["vocab", "--prepared", f"{root}/prepared", "--output",
                             f"{root}/unigram", "--model", "unigram", "--vocab-size", "2000",
                             "--joined", "--character-coverage", "0.98",
                             "--sample-sentences", "1500"]),
        (f"{root}/encoded", ["encode", "--prepared", f"{root}/prepared", "--vocab",
                             f"{root}/t2t", "--output", f"{root}/encoded", "--formats",
                             "arrow,fairseq"]),
    ]  # fmt: skip


def started_workers(cluster: Hosts) -> list[int]:
    """How many SDK workers each worker host's pool has started so far."""
    return [cluster.pool_log(h).read_text().count(STARTED_WORKER) for h in cluster.workers]


@pytest.mark.timeout(1800)  # eight whole commands, four of them on the cluster
def test_every_step_from_and_to_object_storage_gives_the_fnapi_bytes(hosts: Hosts):
    """Each step on the cluster, its Python work in the worker hosts' pools (both of them
    over the steps: the engine places a small job's few tasks as it likes), commits the
    files the FnApiRunner commits from the same inputs."""
    first = started_workers(hosts)
    for (url, args), (reference, fnapi_args) in zip(
        steps(f"{BUCKET}/{hosts.engine}"), steps(f"{BUCKET}/fnapi-{hosts.engine}"), strict=True
    ):
        done = hosts.run(hosts.head, nmtpipe(*fnapi_args), timeout=300)
        assert done.returncode == 0, done.stderr
        before = sum(started_workers(hosts))
        done = hosts.run(hosts.head, nmtpipe(*args, *hosts.options, *DEADLINE), timeout=600)
        assert done.returncode == 0, done.stderr
        assert digests(hosts, url) == digests(hosts, reference), url
        if not url.endswith("/t2t"):  # t2t from prepare's counts runs no Beam job
            assert sum(started_workers(hosts)) > before, url
    last = started_workers(hosts)
    assert all(b > a for a, b in zip(first, last, strict=True)), (first, last)


@pytest.mark.timeout(1200)
def test_a_worker_host_lost_during_prepare_ends_it_in_one_line_or_the_same_bytes(hosts: Hosts):
    """SIGKILL to a worker host's TaskManager or Spark worker and its worker pool once
    that pool has started the job's workers (the first host whose pool does).

    Flink fails a batch job that lost a TaskManager (no restart): one line, nothing
    committed, and once the host is started again the rerun commits the FnApiRunner's
    bytes. Spark runs the lost executor's tasks again on the other host: the step
    commits the FnApiRunner's bytes itself.
    """
    url = f"{BUCKET}/{hosts.engine}-killed/prepared"
    fnapi = digests(hosts, f"{BUCKET}/fnapi-{hosts.engine}/prepared")
    argv = nmtpipe(*PREPARE, "--output", url, *hosts.options, *DEADLINE)
    before = started_workers(hosts)
    proc = hosts.start(hosts.head, argv)
    try:
        deadline = time.monotonic() + 180
        # The victim: the first host whose pool starts a worker of the job (Spark may
        # give a small job's tasks to one executor only, either one).
        while (started := started_workers(hosts)) == before:
            assert proc.poll() is None and time.monotonic() < deadline, "the job never ran"
            time.sleep(0.2)
        grew = [b > a for a, b in zip(before, started, strict=True)]
        victim = hosts.workers[grew.index(True)]
        for pid in hosts.pids(victim).values():
            os.killpg(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if hosts.engine == "spark":
        assert proc.returncode == 0, err
        assert digests(hosts, url) == fnapi
    else:
        lines = err.strip().splitlines()
        assert proc.returncode == 1, err
        # The engine's first error: the lost TaskManager, or a channel to it that broke.
        assert lines[-1].startswith("nmtpipe prepare: error: the Beam job failed on "), err
        assert [line for line in lines if line.startswith("nmtpipe")] == [lines[-1]], err
        assert not exists(hosts, f"{url}/manifest.json")
    # The lost host back, as it was started: the same command commits the same bytes.
    restarted = hosts.local_cluster(victim, "restart", hosts.engine)
    assert restarted.returncode == 0, restarted.stderr
    done = hosts.run(hosts.head, [*argv, "--force"], timeout=600)
    assert done.returncode == 0, done.stderr
    assert digests(hosts, url) == fnapi
