"""`scripts/local-cluster` without downloads: arguments, status and stop of recorded
process groups, the one-line refusal when the job-server jar cannot be fetched, and the
pure parts (options, Flink configuration, archives, jar metadata).

Starting real Flink and Spark clusters (~550 MB of downloads, JVMs) is for a separate,
slow test file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "local-cluster"
sys.path.insert(0, str(SCRIPT.parent))
procs = importlib.import_module("cluster_procs")
fetch = importlib.import_module("cluster_fetch")
recipes = importlib.import_module("cluster_recipes")
local_cluster = importlib.import_module("local_cluster")


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The script, with its cache and state in tmp_path and no NMTPIPE_ setting inherited."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NMTPIPE_")}
    base.update(
        NMTPIPE_CLUSTER_CACHE=str(tmp_path / "cache"),
        NMTPIPE_CLUSTER_STATE=str(tmp_path / "state"),
    )
    base.update(env)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_help_names_the_commands_and_every_setting(tmp_path):
    result = run(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    for word in ("start", "stop", "status", *recipes.ENV):
        assert word in result.stdout


@pytest.mark.parametrize(
    "args",
    [[], ["start"], ["start", "hadoop"], ["stop", "hadoop"], ["status", "x"], ["restart"]],
)
def test_argument_errors_exit_2_with_the_usage(tmp_path, args):
    result = run(tmp_path, *args)
    assert result.returncode == 2
    assert "usage: local-cluster" in result.stderr
    assert result.stdout == ""


def test_status_and_stop_when_nothing_runs(tmp_path):
    status = run(tmp_path, "status")
    assert (status.returncode, status.stdout) == (0, "flink: not running\nspark: not running\n")
    stop = run(tmp_path, "stop")
    assert stop.returncode == 0 and stop.stdout == ""
    assert "flink: not running" in stop.stderr and "spark: not running" in stop.stderr
    assert run(tmp_path, "stop", "spark").stderr.strip() == "local-cluster: spark: not running"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"NMTPIPE_FLINK_REST_PORT": "http"}, "NMTPIPE_FLINK_REST_PORT=http is not a port"),
        ({"NMTPIPE_CLUSTER_TIMEOUT": "soon"}, "is not a number of seconds"),
        ({"NMTPIPE_CLUSTER_CACHE": str(REPO / "cache")}, "is inside the repository"),
    ],
)
def test_bad_settings_are_one_line(tmp_path, env, says):
    result = run(tmp_path, "start", "flink", **env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and says in result.stderr


def fake_mvn(tmp_path: Path) -> str:
    """A PATH whose `mvn` fails as a repository that refuses the artifact does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text("#!/bin/sh\necho '[ERROR] Could not find artifact (refused)'\nexit 1\n")
    mvn.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.parametrize("cluster", ["flink", "spark"])
def test_a_job_server_jar_maven_refuses_stops_the_start_in_one_line(tmp_path, cluster):
    beam = importlib.metadata.version("apache-beam")
    result = run(tmp_path, "start", cluster, PATH=fake_mvn(tmp_path), NMTPIPE_PYTHON=sys.executable)
    assert result.returncode == 1
    assert result.stdout == ""  # no options: nothing to submit to
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    artifact = recipes.JOB_SERVER_ARTIFACT[cluster]
    assert f"org.apache.beam:{artifact}:{beam}" in errors[0]
    assert f"NMTPIPE_{cluster.upper()}_JOB_SERVER_JAR" in errors[0]
    assert str(tmp_path / "cache" / "jars" / f"{artifact}-{beam}.jar") in errors[0]
    # It fails before downloading or starting anything.
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["jars"]
    assert not (tmp_path / "state" / cluster / "state.json").exists()


def test_a_job_server_jar_setting_that_is_no_jar_is_one_line(tmp_path):
    result = run(
        tmp_path,
        "start",
        "spark",
        NMTPIPE_PYTHON=sys.executable,
        NMTPIPE_SPARK_JOB_SERVER_JAR=str(tmp_path / "missing.jar"),
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith("missing.jar is not a jar file")


# -- recorded process groups --------------------------------------------------------------


def spawn_group(tmp_path: Path) -> tuple[subprocess.Popen, procs.Record]:
    """A shell with a child, in a session of its own, as the script starts a component."""
    script = "sleep 300 & sleep 300"
    return procs.spawn("sleeper", ["sh", "-c", script], dict(os.environ),
                       tmp_path / "sleeper.log", tmp_path, "nowhere:1")  # fmt: skip


@contextlib.contextmanager
def sleeper_group(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, procs.Record]]:
    """`spawn_group`'s group, killed at the end if a test left it running."""
    proc, record = spawn_group(tmp_path)
    try:
        yield proc, record
    finally:
        if proc.poll() is None:
            os.killpg(record.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def write_record(tmp_path: Path, cluster: str, record: procs.Record, **extra) -> Path:
    folder = tmp_path / "state" / cluster
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    state = {"cluster": cluster, "version": "x", "started": "then", "options": "--runner=X"}
    state.update(rest="http://127.0.0.1:9", components=[record], ready=True)
    state.update(extra)
    procs.write_state(folder / "state.json", state)
    return folder


def wait_until(condition, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_stop_ends_the_recorded_group_with_its_children(tmp_path):
    proc, record = spawn_group(tmp_path)
    assert wait_until(lambda: len(procs.group_members(record.pid)) == 3)  # sh and two sleeps
    folder = write_record(tmp_path, "flink", record)

    status = run(tmp_path, "status", "flink")
    assert status.returncode == 0
    assert f"sleeper      pid {record.pid}" in status.stdout and "alive" in status.stdout

    stop = run(tmp_path, "stop", "flink")
    assert stop.returncode == 0
    assert f"sleeper (pid {record.pid}) stopped" in stop.stderr
    proc.wait(timeout=10)
    assert wait_until(lambda: not procs.group_members(record.pid))
    assert sorted(p.name for p in folder.iterdir()) == ["logs"]  # logs stay
    assert run(tmp_path, "status", "flink").stdout == "flink: not running\n"


def test_a_pid_now_used_by_another_process_is_left_alone(tmp_path):
    proc, record = spawn_group(tmp_path)
    try:
        stale = procs.Record(**{**record.__dict__, "starttime": record.starttime - 1})
        write_record(tmp_path, "spark", stale)
        status = run(tmp_path, "status", "spark")
        assert status.returncode == 1 and "DEAD" in status.stdout
        start = run(tmp_path, "start", "spark", "--no-job-server")
        assert start.returncode == 1
        assert (
            "sleeper no longer runs; run `scripts/local-cluster stop spark` first" in start.stderr
        )
        stop = run(tmp_path, "stop", "spark")
        assert stop.returncode == 0 and "had already exited" in stop.stderr
        assert proc.poll() is None  # not ours any more: untouched
    finally:
        os.killpg(record.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_a_start_that_did_not_finish_must_be_stopped_first(tmp_path):
    with sleeper_group(tmp_path) as (proc, record):
        write_record(tmp_path, "flink", record, ready=False)
        start = run(tmp_path, "start", "flink")
        assert start.returncode == 1 and "that start did not finish" in start.stderr
        assert "did not finish" in run(tmp_path, "status", "flink").stdout
        assert run(tmp_path, "stop", "flink").returncode == 0
        proc.wait(timeout=10)


def test_options_prints_a_running_clusters_options_and_starts_nothing(tmp_path):
    missing = run(tmp_path, "options", "flink")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == "local-cluster: error: flink is not running\n"
    with sleeper_group(tmp_path) as (proc, record):
        write_record(tmp_path, "flink", record)
        assert run(tmp_path, "options", "flink").stdout == "--runner=X\n"
        found = json.loads(run(tmp_path, "options", "flink", "--json").stdout)
        assert found["options"] == "--runner=X" and found["pids"] == {"sleeper": record.pid}
        assert found["rest"] == "http://127.0.0.1:9"
        os.killpg(record.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert wait_until(lambda: not procs.group_members(record.pid))
        dead = run(tmp_path, "options", "flink")
        assert (
            dead.returncode == 1 and "flink was started but sleeper no longer runs" in dead.stderr
        )


def test_restart_needs_a_started_cluster_and_its_recorded_settings(tmp_path):
    missing = run(tmp_path, "restart", "spark")
    assert missing.returncode == 1 and "spark is not running" in missing.stderr
    with sleeper_group(tmp_path) as (proc, record):
        write_record(tmp_path, "spark", record)  # as an older script left it: no settings
        old = run(tmp_path, "restart", "spark")
        assert old.returncode == 1 and "recorded no settings" in old.stderr
        assert proc.poll() is None  # refused before stopping anything
        # Recorded settings are used, not the environment's: here a jar that is no jar.
        bad = {"NMTPIPE_SPARK_JOB_SERVER_JAR": str(tmp_path / "gone.jar")}
        write_record(tmp_path, "spark", record, env=bad, job_server_jar="gone.jar")
        again = run(tmp_path, "restart", "spark", NMTPIPE_SPARK_JOB_SERVER_JAR="")
        assert again.returncode == 1
        assert f"sleeper (pid {record.pid}) stopped" in again.stderr
        assert f"NMTPIPE_SPARK_JOB_SERVER_JAR={tmp_path / 'gone.jar'} is not a jar" in again.stderr
        proc.wait(timeout=10)


# -- the pure parts -----------------------------------------------------------------------


def test_beam_options_name_a_portable_job_endpoint_and_loopback_workers():
    ports = recipes.Settings.from_env({"NMTPIPE_CLUSTER_CACHE": "/tmp/c"}).ports
    one = recipes.Layout()
    assert recipes.beam_options("flink", ports, True, one) == (
        "--runner=PortableRunner --job_endpoint=localhost:8099 --environment_type=LOOPBACK "
        "--parallelism=2"
    )
    assert recipes.beam_options("spark", ports, True, one) == (
        "--runner=PortableRunner --job_endpoint=localhost:8097 --environment_type=LOOPBACK"
    )
    assert "--runner=FlinkRunner --flink_master=localhost:8081 --flink_version=1.20" in (
        recipes.beam_options("flink", ports, False, one)
    )
    assert "--spark_master_url=spark://127.0.0.1:7077" in (
        recipes.beam_options("spark", ports, False, one)
    )


def test_worker_pools_make_the_options_external_with_a_worker_per_slot():
    ports = recipes.Settings.from_env({"NMTPIPE_CLUSTER_CACHE": "/tmp/c"}).ports
    pools = local_cluster.layout_of(parse("--workers", "2"))
    assert (pools.workers, pools.slots, pools.pools) == (2, 1, True)
    assert recipes.beam_options("flink", ports, True, pools) == (
        "--runner=PortableRunner --job_endpoint=localhost:8099 --environment_type=EXTERNAL "
        "--environment_config=localhost:50000 --sdk_worker_parallelism=1 --parallelism=2"
    )
    head = local_cluster.layout_of(parse("--role", "head", "--address", "10.9.0.1",
                                         "--workers", "2"))  # fmt: skip
    assert recipes.beam_options("spark", ports, True, head) == (
        "--runner=PortableRunner --job_endpoint=10.9.0.1:8097 --environment_type=EXTERNAL "
        "--environment_config=localhost:50000 --sdk_worker_parallelism=2"
    )
    assert "--parallelism=4" in recipes.beam_options("flink", ports, True, head)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--address", "10.9.0.1"], "--address and --head go with --role head or worker"),
        (["--role", "head"], "--role head needs --address"),
        (["--role", "worker", "--address", "10.9.0.2"], "--role worker needs --head"),
        (["--role", "worker", "--address", "a", "--head", "b", "--workers", "2"],
         "--workers goes with --role all or head"),
        (["--workers", "0"], "--workers must be at least 1, not 0"),
    ],
)  # fmt: skip
def test_a_wrong_mix_of_layout_flags_is_one_line(args, says):
    with pytest.raises(local_cluster.ClusterError, match=re.escape(says)):
        local_cluster.layout_of(parse(*args))


def parse(*args: str) -> argparse.Namespace:
    return local_cluster.build_parser().parse_args(["start", "flink", *args])


def test_the_flink_configuration_binds_loopback_with_two_slots(tmp_path):
    env = {"NMTPIPE_CLUSTER_CACHE": "/tmp/c", "NMTPIPE_FLINK_REST_PORT": "18081"}
    text = recipes.flink_config(recipes.Settings.from_env(env), tmp_path, recipes.Layout())
    lines = dict(line.split(": ", 1) for line in text.splitlines()[1:])
    assert lines["rest.port"] == "18081" and lines["taskmanager.numberOfTaskSlots"] == "2"
    for key in ("rest.bind-address", "jobmanager.bind-host", "taskmanager.bind-host"):
        assert lines[key] == '"localhost"'
    assert "--add-opens=java.base/java.util=ALL-UNNAMED" in lines["env.java.opts.all"]


def test_a_worker_hosts_flink_configuration_names_the_head_and_binds_its_own_address(tmp_path):
    settings = recipes.Settings.from_env({"NMTPIPE_CLUSTER_CACHE": "/tmp/c"})
    worker = recipes.Layout("worker", "10.9.0.2", "10.9.0.1", 1, 2, pools=True)
    text = recipes.flink_config(settings, tmp_path, worker)
    lines = dict(line.split(": ", 1) for line in text.splitlines()[1:])
    assert lines["jobmanager.rpc.address"] == lines["rest.address"] == '"10.9.0.1"'
    assert lines["taskmanager.host"] == '"10.9.0.2"'
    assert lines["taskmanager.bind-host"] == lines["rest.bind-address"] == '"0.0.0.0"'


def test_an_sdist_folder_is_unpacked_and_escaping_paths_refused(tmp_path):
    def sdist(members: dict[str, bytes]) -> Path:
        path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.tar.gz"
        with tarfile.open(path, "w:gz") as tf:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
                tf.addfile(info, io.BytesIO(data))
        return path

    good = sdist({"p-1/deps/bin/run.sh": b"#!/bin/sh\n", "p-1/deps/jars/a.jar": b"j",
                  "p-1/deps/data/big.txt": b"x", "p-1/setup.py": b""})  # fmt: skip
    fetch.unpack_sdist_dirs(good, "deps", ("bin", "jars"), tmp_path / "home")
    home = tmp_path / "home"
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) == [
        "bin/run.sh",
        "jars/a.jar",
    ]
    assert os.access(home / "bin/run.sh", os.X_OK)
    bad = sdist({"p-1/deps/jars/../../../evil": b"x"})
    with pytest.raises(procs.ClusterError, match="unsafe path"):
        fetch.unpack_sdist_dirs(bad, "deps", ("jars",), tmp_path / "home2")


def test_the_versions_shaded_into_a_job_server_jar_are_read(tmp_path):
    jar = tmp_path / "js.jar"
    with zipfile.ZipFile(jar, "w") as zf:
        zf.writestr("META-INF/MANIFEST.MF", "Main-Class: org.apache.beam.X\n")
        zf.writestr("spark-version-info.properties", "version=3.5.0\nuser=x\n")
        zf.writestr(
            "META-INF/maven/org.apache.flink/flink-runtime/pom.properties", "version=1.20.0\n"
        )
    assert fetch.bundled_version(jar, "org.apache.spark", ("spark-core_2.12",)) == "3.5.0"
    assert fetch.bundled_version(jar, "org.apache.flink", ("flink-runtime",)) == "1.20.0"
    assert fetch.bundled_version(jar, "org.apache.flink", ("flink-core",)) is None
    assert fetch.main_class(jar) == "org.apache.beam.X"


def test_state_round_trips(tmp_path):
    record = procs.Record("jobmanager", 1, 2, "log", "url")
    procs.write_state(tmp_path / "state.json", {"components": [record], "ready": True})
    assert procs.read_state(tmp_path / "state.json") == {"components": [record], "ready": True}
    assert json.loads((tmp_path / "state.json").read_text())["components"][0]["pid"] == 1
