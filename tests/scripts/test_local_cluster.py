"""`scripts/local-cluster` without downloads: arguments, status and stop of recorded
process groups, where the job server comes from (Beam's shaded jar first, else an
assembly by Maven, each faked here) and the one-line refusals when none can be had, the
options that fail `nmtpipe` when no cluster runs, and the pure parts (options, Flink
configuration, archives, jar metadata).

Starting real Flink and Spark clusters (~1 GB of downloads, JVMs) is tests/clusters'
part, which CI runs on the clusters it starts.
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
import shutil
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
job_servers = importlib.import_module("cluster_job_server")
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


def bin_path(tmp_path: Path, *tools: str, mvn: str | None = None) -> str:
    """A PATH of only `tools` (linked from this machine's) and, if given, an `mvn` script."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    if mvn is not None:
        (bin_dir / "mvn").write_text(mvn)
        (bin_dir / "mvn").chmod(0o755)
    return str(bin_dir)


REFUSING_MVN = '#!/bin/sh\necho "[ERROR] Could not find artifact (refused) $*"\nexit 1\n'


def resolving_mvn(tmp_path: Path, engine_jar: str) -> str:
    """An `mvn` that "resolves" a pom into -DoutputDirectory as copy-dependencies does: the
    engine's jar and a runner jar holding both drivers; each call is logged."""
    calls = tmp_path / "mvn-calls"
    return f"""#!{sys.executable}
import sys, zipfile
from pathlib import Path
with open({str(calls)!r}, "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
out = Path(next(a.split("=", 1)[1] for a in sys.argv if a.startswith("-DoutputDirectory=")))
out.mkdir(parents=True)
for name in ({engine_jar!r}, "beam-runners-x-2.70.0.jar"):
    with zipfile.ZipFile(out / name, "w") as zf:
        for driver in {list(job_servers.DRIVER.values())!r}:
            zf.writestr(driver.replace(".", "/") + ".class", b"")
"""


def refused_repository(tmp_path: Path) -> str:
    """A Maven repository that has nothing (a file:// URL of an empty folder)."""
    (tmp_path / "repo").mkdir(exist_ok=True)
    return (tmp_path / "repo").as_uri()


@pytest.mark.parametrize("cluster", ["flink", "spark"])
def test_with_the_shaded_jar_refused_and_no_maven_one_line_says_what_to_install(tmp_path, cluster):
    beam = importlib.metadata.version("apache-beam")
    result = run(tmp_path, "start", cluster, PATH=bin_path(tmp_path, "java"),
                 NMTPIPE_PYTHON=sys.executable,
                 NMTPIPE_MAVEN_REPOSITORY=refused_repository(tmp_path))  # fmt: skip
    assert result.returncode == 1
    # No options: a word nmtpipe refuses, so that $(...) cannot run on the local runner.
    assert result.stdout == f"--{cluster}-cluster-is-not-running\n"
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    artifact = job_servers.SHADED_ARTIFACT[cluster]
    assert (
        f"no {cluster} job server: Beam's shaded jar org.apache.beam:{artifact}:{beam}"
        in (errors[0])
    )
    assert "install it (Debian: apt-get install maven)" in errors[0]
    assert f"NMTPIPE_{cluster.upper()}_JOB_SERVER" in errors[0]
    # It fails before downloading or starting anything.
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["jars"]
    assert list((tmp_path / "cache" / "jars").iterdir()) == []
    assert not (tmp_path / "state" / cluster / "state.json").exists()


def test_with_the_shaded_jar_refused_and_maven_refusing_one_line_names_its_log(tmp_path):
    result = run(tmp_path, "start", "spark",
                 PATH=bin_path(tmp_path, "java", mvn=REFUSING_MVN), NMTPIPE_PYTHON=sys.executable,
                 NMTPIPE_MAVEN_REPOSITORY=refused_repository(tmp_path))  # fmt: skip
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    coordinates = " + ".join(job_servers.ASSEMBLIES["spark"].coordinates)
    assert f"no spark job server: Maven could not assemble one from {coordinates}" in errors[0]
    log = tmp_path / "cache/job-servers" / f"{job_servers.ASSEMBLIES['spark'].name}.mvn.log"
    assert f"mvn exited with code 1; log: {log})" in errors[0]
    assert "refused" in log.read_text()
    assert [p.name for p in log.parent.iterdir()] == [log.name]  # no half-made assembly


def test_beams_shaded_jar_comes_first_as_beam_fetches_it(tmp_path, monkeypatch):
    beam = "2.77.0"
    artifact = job_servers.SHADED_ARTIFACT["flink"]
    folder = tmp_path / "repo/org/apache/beam" / artifact / beam
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / f"{artifact}-{beam}.jar", "w") as zf:
        zf.writestr("META-INF/maven/org.apache.flink/flink-runtime/pom.properties",
                    "version=1.19.3\n")  # fmt: skip
    mvn = resolving_mvn(tmp_path, "flink-runtime-1.19.0.jar")
    monkeypatch.setenv("PATH", bin_path(tmp_path, mvn=mvn) + os.pathsep + os.environ["PATH"])
    repository = (tmp_path / "repo").as_uri()
    server = job_servers.fetch("flink", beam, tmp_path / "cache", repository, "X", print)
    jar = tmp_path / "cache/jars" / f"{artifact}-{beam}.jar"
    assert (server.path, server.engine, server.classpath) == (jar, "1.19.3", str(jar))
    assert server.source == (
        f"Beam's shaded jar org.apache.beam:{artifact}:{beam}, from "
        f"{repository}/org/apache/beam/{artifact}/{beam}/{artifact}-{beam}.jar"
    )
    assert not (tmp_path / "mvn-calls").exists()
    assert job_servers.cached("flink", beam, tmp_path / "cache").path == jar


def test_where_the_shaded_jar_is_refused_maven_assembles_one_once(tmp_path, monkeypatch):
    mvn = resolving_mvn(tmp_path, "flink-runtime-1.19.0.jar")
    monkeypatch.setenv("PATH", bin_path(tmp_path, mvn=mvn) + os.pathsep + os.environ["PATH"])
    cache = tmp_path / "cache"
    server = job_servers.fetch("flink", "2.77.0", cache, refused_repository(tmp_path), "X",
                               lambda _: None)  # fmt: skip
    assembly = job_servers.ASSEMBLIES["flink"]
    folder = cache / "job-servers" / assembly.name
    assert (server.path, server.engine) == (folder / "lib", "1.19.0")
    assert server.classpath == f"{folder / 'lib'}/*"
    assert server.source.startswith(
        "assembled by Maven from org.apache.beam:beam-runners-flink-1.19:2.70.0 + "
        "org.apache.beam:beam-runners-java-job-service:2.65.0 + "
    )
    pom = (folder / "pom.xml").read_text()
    assert "<artifactId>beam-runners-flink-1.19</artifactId><version>2.70.0</version>" in pom
    (call,) = (tmp_path / "mvn-calls").read_text().splitlines()
    assert f"{job_servers.DEPENDENCY_PLUGIN}:copy-dependencies" in call
    # Every later start, whatever its Beam, finds it in the cache: no Maven.
    again = job_servers.cached("flink", "2.78.0", cache)
    assert (again.path, again.engine) == (server.path, "1.19.0")
    assert again.source == "assembled by Maven from " + " + ".join(assembly.coordinates) + (
        ", cached"
    )
    assert job_servers.assemble("flink", cache, "mvn", print) == folder
    assert len((tmp_path / "mvn-calls").read_text().splitlines()) == 1


def test_a_cluster_version_off_the_job_servers_line_is_one_line_before_any_download(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    with zipfile.ZipFile(lib / "flink-runtime-1.19.0.jar", "w") as zf:
        zf.writestr("x", b"")
    result = run(tmp_path, "start", "flink", NMTPIPE_PYTHON=sys.executable,
                 NMTPIPE_FLINK_JOB_SERVER=str(lib), NMTPIPE_FLINK_VERSION="1.20.5")  # fmt: skip
    assert result.returncode == 1
    assert f"job server: NMTPIPE_FLINK_JOB_SERVER={lib}; built for Flink 1.19.0" in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "local-cluster: error: NMTPIPE_FLINK_VERSION=1.20.5 does not match the job server, "
        "built for Flink 1.19.0: unset NMTPIPE_FLINK_VERSION or name a 1.19.x"
    )
    assert not (tmp_path / "cache").exists()


def test_without_java_17_one_line_says_what_to_install(tmp_path):
    result = run(tmp_path, "start", "spark", PATH=bin_path(tmp_path))
    assert result.returncode == 1
    assert result.stderr == (
        "local-cluster: error: Flink and Spark here need a JDK 17 (no `java` on PATH): install "
        "one (Debian: apt-get install openjdk-17-jdk-headless)\n"
    )


# A Java 17 runtime without a JDK's compiler, as `openjdk-17-jre-headless` installs it.
JRE = """#!/bin/sh
case "$1" in
  -version) echo 'openjdk version "17.0.15" 2025-04-15' >&2 ;;
  --list-modules) echo java.base@17.0.15; echo java.compiler@17.0.15 ;;
esac
"""


def test_a_java_without_its_compiler_runs_no_job_server_and_says_so(tmp_path):
    """The job server runs `JobServerLauncher.java` in source-file mode: a JRE cannot."""
    path = bin_path(tmp_path)
    (Path(path) / "java").write_text(JRE)
    (Path(path) / "java").chmod(0o755)
    result = run(tmp_path, "start", "flink", PATH=path, NMTPIPE_PYTHON=sys.executable)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "local-cluster: error: Flink and Spark here need a JDK 17 (its `java` is a runtime "
        "without the compiler that the job server needs): install one (Debian: apt-get install "
        "openjdk-17-jdk-headless)"
    )


def test_a_job_server_setting_that_is_neither_a_jar_nor_jars_is_one_line(tmp_path):
    result = run(
        tmp_path,
        "start",
        "spark",
        NMTPIPE_PYTHON=sys.executable,
        NMTPIPE_SPARK_JOB_SERVER=str(tmp_path / "missing.jar"),
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(
        "missing.jar is neither a jar file nor a folder of jars"
    )


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
    assert (missing.returncode, missing.stdout) == (1, "--flink-cluster-is-not-running\n")
    assert missing.stderr == "local-cluster: error: flink is not running\n"
    assert run(tmp_path, "options", "flink", "--json").stdout == ""
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


def test_the_options_idiom_fails_nmtpipe_when_no_cluster_runs(tmp_path):
    """`nmtpipe prepare ... $(scripts/local-cluster options flink)`, as the docs write it,
    with no cluster: the command fails at once, saying which, instead of running locally."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMTPIPE_")}
    env["NMTPIPE_CLUSTER_STATE"] = str(tmp_path / "state")
    line = (f"{sys.executable} -m nmtpipe prepare --example --output {tmp_path / 'out'} "
            f"$({sys.executable} {SCRIPT} options flink)")  # fmt: skip
    done = subprocess.run(["sh", "-c", line], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "local-cluster: error: flink is not running"
    assert lines[-1].startswith(
        "nmtpipe prepare: error: unknown option --flink-cluster-is-not-running"
    ), done.stderr
    assert not (tmp_path / "out").exists()


def test_a_skipped_cluster_test_fails_where_cluster_tests_are_required(tmp_path):
    """CI sets NMTPIPE_CLUSTER_TESTS=required: a test of tests/clusters that would skip
    (here: no cluster runs) fails instead."""
    test = "tests/clusters/test_engines.py::test_a_refresh_that_adds_a_part_gives_the_fnapi_bytes"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMTPIPE_")}
    env["NMTPIPE_CLUSTER_STATE"] = str(tmp_path / "state")

    def pytest_run(**more: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", test],
            cwd=REPO, env=dict(env, **more), capture_output=True, text=True, timeout=300,
            check=False,
        )  # fmt: skip

    skipped = pytest_run()
    assert skipped.returncode == 0 and "2 skipped" in skipped.stdout, skipped.stdout
    required = pytest_run(NMTPIPE_CLUSTER_TESTS="required")
    assert required.returncode == 1 and "2 errors" in required.stdout, required.stdout
    assert "skipped where NMTPIPE_CLUSTER_TESTS=required: no flink cluster runs" in (
        required.stdout
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
        bad = {"NMTPIPE_SPARK_JOB_SERVER": str(tmp_path / "gone.jar")}
        write_record(tmp_path, "spark", record, env=bad, job_server="gone.jar")
        again = run(tmp_path, "restart", "spark", NMTPIPE_SPARK_JOB_SERVER="")
        assert again.returncode == 1
        assert f"sleeper (pid {record.pid}) stopped" in again.stderr
        assert f"NMTPIPE_SPARK_JOB_SERVER={tmp_path / 'gone.jar'} is neither" in again.stderr
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
    assert "--runner=FlinkRunner --flink_master=localhost:8081 --flink_version=1.19" in (
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


def test_the_engine_versions_of_a_job_server_are_read(tmp_path):
    jar = tmp_path / "js.jar"
    with zipfile.ZipFile(jar, "w") as zf:
        zf.writestr("META-INF/MANIFEST.MF", "Main-Class: org.apache.beam.X\n")
        zf.writestr("spark-version-info.properties", "version=3.5.0\nuser=x\n")
        zf.writestr(
            "META-INF/maven/org.apache.flink/flink-runtime/pom.properties", "version=1.20.0\n"
        )
    assert job_servers.engine_version("spark", jar) == "3.5.0"
    assert job_servers.engine_version("flink", jar) == "1.20.0"
    assert job_servers.bundled_version(jar, "org.apache.flink", "flink-core") is None
    assert job_servers.main_class(jar) == "org.apache.beam.X"
    lib = tmp_path / "lib"  # an assembly's: the version in the engine jar's name
    lib.mkdir()
    for name in ("flink-runtime-web-1.19.0.jar", "flink-runtime-1.19.0.jar", "spark-tags.jar"):
        (lib / name).write_bytes(b"")
    assert job_servers.engine_version("flink", lib) == "1.19.0"
    assert job_servers.engine_version("spark", lib) is None


def jar_of(path: Path, *classes: str) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        zf.writestr("META-INF/versions/9/module-info.class", b"")
        for name in classes:
            zf.writestr(f"{name.replace('.', '/')}.class", b"")
    return path


def test_the_cluster_gets_the_job_servers_libraries_it_lacks_and_jobs_carry_none(tmp_path):
    """What a job would carry goes on the cluster's class path once (`JobServerLauncher`):
    a library the engine bundles stays the engine's; a newer one, with classes the
    engine's lacks, is added whole; SLF4J stays the engine's (its binding)."""
    engine = tmp_path / "lib"  # Flink's lib/ in its home, tmp_path
    engine.mkdir()
    dist = jar_of(engine / "flink-dist.jar", *(f"o.a.flink.C{k}" for k in range(200)),
                  "o.a.c.lang3.A", "o.a.c.lang3.B", "org.slf4j.Logger")  # fmt: skip
    lib = tmp_path / "job-server"
    lib.mkdir()
    jar_of(lib / "flink-runtime.jar", *(f"o.a.flink.C{k}" for k in range(200)), "o.a.f.Bash")
    jar_of(lib / "commons-lang3-3.18.jar", "o.a.c.lang3.A", "o.a.c.lang3.B", "o.a.c.lang3.N")
    jar_of(lib / "slf4j-api-2.0.jar", "org.slf4j.Logger", "org.slf4j.spi.Provider")
    jar_of(lib / "beam-runners-flink.jar", "o.a.beam.Runner")
    server = job_servers.JobServer(lib, "1.19.0", "an assembly")
    lacking = job_servers.lacking(server, [dist])
    assert [p.name for p in lacking] == ["beam-runners-flink.jar", "commons-lang3-3.18.jar"]
    state = tmp_path / "state"
    state.mkdir()
    flink_lib = recipes.cluster_lib("flink", tmp_path, state, lacking)  # FLINK_LIB_DIR
    assert sorted(p.name for p in flink_lib.iterdir()) == [
        "beam-runners-flink.jar", "commons-lang3-3.18.jar", "flink-dist.jar"]  # fmt: skip
    assert (flink_lib / "flink-dist.jar").resolve() == dist
    settings = recipes.Settings.from_env({"NMTPIPE_CLUSTER_CACHE": str(tmp_path / "cache")})
    for cluster, master in (("flink", "--flink-master"), ("spark", "--spark-master-url")):
        argv = recipes._job_server(cluster, server, state, settings, [master, "x"],
                                   recipes.Layout()).argv  # fmt: skip
        launcher = argv.index(str(recipes.LAUNCHER))
        assert argv[launcher - 1 : launcher + 2] == ["-Dstage.classpath=", str(recipes.LAUNCHER),
                                                     job_servers.DRIVER[cluster]]  # fmt: skip
    assert f"-Dspark.executor.extraClassPath={state / 'lib'}/*" in argv


def test_state_round_trips(tmp_path):
    record = procs.Record("jobmanager", 1, 2, "log", "url")
    procs.write_state(tmp_path / "state.json", {"components": [record], "ready": True})
    assert procs.read_state(tmp_path / "state.json") == {"components": [record], "ready": True}
    assert json.loads((tmp_path / "state.json").read_text())["components"][0]["pid"] == 1
