"""What `scripts/local-cluster` runs: its settings, and each cluster's processes.

Flink 1.20 (a JobManager and a TaskManager with 2 slots) and Spark 3.5 (a master and a
worker with 2 cores) on 127.0.0.1, each with Beam's job server in front; the Beam
options that submit to them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cluster_procs import ClusterError, get_json, port_open

REPO = Path(__file__).resolve().parents[1]
CLUSTERS = ("flink", "spark")
SLOTS = 2  # Flink task slots, Spark worker cores: the machine's 2 cores
FLINK_LINE, SPARK_LINE = "1.20", "3.5"  # what Beam's flink-1.20 and spark-3 job servers run on
# Without a job-server jar to follow (see local_cluster._pick_version): the newest Flink
# 1.20 patch, and the Spark that Beam's spark-3 runner is built against.
DEFAULT_FLINK, DEFAULT_SPARK = "1.20.5", "3.5.0"
JOB_SERVER_ARTIFACT = {
    "flink": f"beam-runners-flink-{FLINK_LINE}-job-server",
    "spark": "beam-runners-spark-3-job-server",
}
JOB_SERVER_MAIN = {
    "flink": "org.apache.beam.runners.flink.FlinkJobServerDriver",
    "spark": "org.apache.beam.runners.spark.SparkJobServerDriver",
}

# Every setting, its default and what it is for: read once, in Settings.from_env, and
# listed by --help.
ENV = {
    "NMTPIPE_CLUSTER_CACHE": (
        "${XDG_CACHE_HOME:-~/.cache}/nmtpipe-clusters",
        "downloads, unpacked runtimes, job-server jars (outside the repository)",
    ),
    "NMTPIPE_CLUSTER_STATE": ("<cache>/state", "pids, configuration and logs, per cluster"),
    "NMTPIPE_PYTHON": (
        "python on PATH, else <repo>/.venv/bin/python",
        "the python that submits pipelines: its apache-beam version picks the jar",
    ),
    "NMTPIPE_FLINK_VERSION": (
        f"the job server's Flink if {FLINK_LINE}.x, else {DEFAULT_FLINK}",
        "Flink from PyPI (apache-flink, apache-flink-libraries)",
    ),
    "NMTPIPE_SPARK_VERSION": (
        f"the job server's Spark if {SPARK_LINE}.x, else {DEFAULT_SPARK}",
        "Spark from PyPI (pyspark)",
    ),
    "NMTPIPE_FLINK_JOB_SERVER_JAR": (
        f"<cache>/jars/{JOB_SERVER_ARTIFACT['flink']}-<beam>.jar",
        "an existing Flink job-server jar",
    ),
    "NMTPIPE_SPARK_JOB_SERVER_JAR": (
        f"<cache>/jars/{JOB_SERVER_ARTIFACT['spark']}-<beam>.jar",
        "an existing Spark job-server jar",
    ),
    "NMTPIPE_FLINK_REST_PORT": ("8081", "Flink REST API and web UI"),
    "NMTPIPE_FLINK_RPC_PORT": ("6123", "Flink JobManager RPC"),
    "NMTPIPE_FLINK_JOB_PORT": ("8099", "Beam job service in front of Flink"),
    "NMTPIPE_SPARK_MASTER_PORT": ("7077", "Spark master"),
    "NMTPIPE_SPARK_UI_PORT": ("8080", "Spark master web UI (/json/)"),
    "NMTPIPE_SPARK_WORKER_UI_PORT": ("8082", "Spark worker web UI"),
    "NMTPIPE_SPARK_JOB_PORT": ("8097", "Beam job service in front of Spark"),
    "NMTPIPE_FLINK_JM_MEMORY": ("1024m", "Flink JobManager process size"),
    "NMTPIPE_FLINK_TM_MEMORY": ("4096m", "Flink TaskManager process size"),
    "NMTPIPE_SPARK_WORKER_MEMORY": ("2g", "memory the Spark worker gives executors"),
    "NMTPIPE_JOB_SERVER_HEAP": ("1g", "-Xmx of a job server (the Spark driver)"),
    "NMTPIPE_CLUSTER_TIMEOUT": ("180", "seconds each process may take to answer"),
    "NMTPIPE_CLUSTER_STOP_GRACE": ("20", "seconds between SIGTERM and SIGKILL"),
}
# Java 17 keeps JDK internals closed; Flink (its shipped env.java.opts.all) and Spark
# (launcher JavaModuleOptions) open these. The job servers are the Flink client and the
# Spark driver, started by plain `java -jar`, so they get the union too.
JAVA_OPENS = [
    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio",
    "java.text", "java.time", "java.util", "java.util.concurrent",
    "java.util.concurrent.atomic", "java.util.concurrent.locks", "jdk.internal.ref",
    "sun.nio.ch", "sun.nio.cs", "sun.security.action", "sun.util.calendar",
]  # fmt: skip
JAVA_FLAGS = [
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in JAVA_OPENS),
]
FLINK_EXTRA_EXPORTS = [  # the Table planner's code generation, as Flink ships them
    f"--add-exports=jdk.compiler/com.sun.tools.javac.{p}=ALL-UNNAMED"
    for p in ("api", "file", "parser", "tree", "util")
]


@dataclass(frozen=True)
class Settings:
    cache: Path
    state_root: Path
    python: str | None
    versions: dict[str, str | None]
    jars: dict[str, str | None]
    ports: dict[str, int]
    memory: dict[str, str]
    timeout_s: float
    grace_s: float

    @classmethod
    def from_env(cls, env: os._Environ[str] | dict[str, str]) -> Settings:
        def get(name: str) -> str:
            value = env.get(name, "")
            return value if value else ENV[name][0]

        xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        cache = Path(env.get("NMTPIPE_CLUSTER_CACHE") or Path(xdg) / "nmtpipe-clusters")
        cache = cache.expanduser().absolute()
        if cache == REPO or REPO in cache.parents:
            raise ClusterError(
                f"NMTPIPE_CLUSTER_CACHE={cache} is inside the repository; the runtimes "
                "(~550 MB) must live outside it"
            )
        state = env.get("NMTPIPE_CLUSTER_STATE")
        ports = {}
        for name in ENV:
            if name.endswith("_PORT"):
                value = get(name)
                if not value.isdigit() or not 0 < int(value) < 65536:
                    raise ClusterError(f"{name}={value} is not a port number")
                ports[name.removeprefix("NMTPIPE_").removesuffix("_PORT").lower()] = int(value)
        numbers = {}
        for name in ("NMTPIPE_CLUSTER_TIMEOUT", "NMTPIPE_CLUSTER_STOP_GRACE"):
            try:
                numbers[name] = float(get(name))
            except ValueError:
                raise ClusterError(f"{name}={get(name)} is not a number of seconds") from None
        return cls(
            cache=cache,
            state_root=Path(state).expanduser().absolute() if state else cache / "state",
            python=env.get("NMTPIPE_PYTHON") or None,
            versions={c: env.get(f"NMTPIPE_{c.upper()}_VERSION") or None for c in CLUSTERS},
            jars={c: env.get(f"NMTPIPE_{c.upper()}_JOB_SERVER_JAR") or None for c in CLUSTERS},
            ports=ports,
            memory={
                "jm": get("NMTPIPE_FLINK_JM_MEMORY"),
                "tm": get("NMTPIPE_FLINK_TM_MEMORY"),
                "worker": get("NMTPIPE_SPARK_WORKER_MEMORY"),
                "job_server": get("NMTPIPE_JOB_SERVER_HEAP"),
            },
            timeout_s=numbers["NMTPIPE_CLUSTER_TIMEOUT"],
            grace_s=numbers["NMTPIPE_CLUSTER_STOP_GRACE"],
        )


def beam_options(cluster: str, ports: dict[str, int], job_server: bool) -> str:
    """The Beam options that submit to the cluster, on one line.

    LOOPBACK: the submitting process hosts the SDK workers, which the TaskManager or
    executor on this host reaches on localhost. A cluster on several hosts needs workers
    where the runner runs instead: --environment_type=EXTERNAL with a worker pool
    (`python -m apache_beam.runners.worker.worker_pool_main`) beside each TaskManager or
    executor, or DOCKER with the SDK's container image.
    """
    if cluster == "flink":
        head = (
            [f"--runner=PortableRunner --job_endpoint=localhost:{ports['flink_job']}"]
            if job_server
            else [
                f"--runner=FlinkRunner --flink_master=localhost:{ports['flink_rest']}",
                f"--flink_version={FLINK_LINE}",
            ]
        )
        return " ".join([*head, "--environment_type=LOOPBACK", f"--parallelism={SLOTS}"])
    head = (
        [f"--runner=PortableRunner --job_endpoint=localhost:{ports['spark_job']}"]
        if job_server
        else [
            "--runner=SparkRunner",
            f"--spark_master_url=spark://127.0.0.1:{ports['spark_master']}",
            "--spark_version=3",
        ]
    )
    return " ".join([*head, "--environment_type=LOOPBACK"])


def flink_config(settings: Settings, state: Path) -> str:
    """conf/config.yaml of the Flink cluster: loopback only, 2 slots, small processes."""
    ports = settings.ports
    values = {
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": ports["flink_rpc"],
        "jobmanager.bind-host": "localhost",
        "jobmanager.memory.process.size": settings.memory["jm"],
        "jobmanager.execution.failover-strategy": "region",
        "taskmanager.host": "localhost",
        "taskmanager.bind-host": "localhost",
        "taskmanager.numberOfTaskSlots": SLOTS,
        "taskmanager.memory.process.size": settings.memory["tm"],
        # A Beam batch job holds a network buffer pool per shuffle edge and slot:
        # prepare's graph asked for 512 more buffers than the default 10% (166 MB) had.
        "taskmanager.memory.network.min": "512m",
        "taskmanager.memory.network.max": "512m",
        # Beam's data channel to the SDK workers (gRPC on Netty) holds prepare's batches
        # in direct memory: 1M pairs died of "OutOfMemoryError: Direct buffer memory"
        # with the default 0 for tasks. Batch sorting needs less managed memory than 40%.
        "taskmanager.memory.task.off-heap.size": "768m",
        "taskmanager.memory.framework.off-heap.size": "256m",
        "taskmanager.memory.managed.fraction": 0.25,
        "parallelism.default": SLOTS,
        "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "rest.port": ports["flink_rest"],
        "io.tmp.dirs": str(state / "tmp"),
        "web.tmpdir": str(state / "tmp" / "web"),
        "env.java.opts.all": " ".join(JAVA_FLAGS + FLINK_EXTRA_EXPORTS),
    }
    lines = [
        f"{k}: {v}" if isinstance(v, int | float) else f'{k}: "{v}"' for k, v in values.items()
    ]
    return "# Written by scripts/local-cluster; the cluster's own copy.\n" + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Component:
    name: str
    argv: list[str]
    env: dict[str, str]
    url: str
    waiting_for: Callable[[], str | None]  # None once it answers as it should


def flink_overview(url: str) -> dict:
    found = get_json(f"{url}/overview")
    return found if isinstance(found, dict) else {}


def spark_master(url: str) -> dict:
    found = get_json(f"{url}/json/")
    return found if isinstance(found, dict) else {}


def _job_server(
    cluster: str, jar: Path, state: Path, settings: Settings, master_args: list[str], port: int
) -> Component:
    argv = [shutil.which("java") or "java", *JAVA_FLAGS, f"-Xmx{settings.memory['job_server']}"]
    argv.append(f"-Djava.io.tmpdir={state / 'tmp'}")
    if cluster == "spark":  # as Spark's launcher sets it for a driver on Java 17+
        argv.append("-Djdk.reflect.useDirectMethodHandle=false")
    argv += ["-jar", str(jar), *master_args, "--job-host", "localhost", "--job-port", str(port)]
    argv += ["--artifact-port", "0", "--expansion-port", "0"]
    argv += ["--artifacts-dir", str(state / "artifacts")]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("JDK_JAVA_OPTIONS", None)
    return Component(
        "job-server",
        argv,
        env,
        f"localhost:{port}",
        lambda: None if port_open("localhost", port) else f"port {port} does not accept yet",
    )


def flink_components(
    home: Path, state: Path, settings: Settings, jar: Path | None
) -> list[Component]:
    rest = f"http://localhost:{settings.ports['flink_rest']}"
    env = dict(
        os.environ,
        FLINK_HOME=str(home),
        FLINK_CONF_DIR=str(state / "conf"),
        FLINK_LOG_DIR=str(state / "logs"),
        FLINK_PID_DIR=str(state),
    )

    def jm_waiting() -> str | None:
        return None if flink_overview(rest) else f"{rest}/overview does not answer yet"

    def tm_waiting() -> str | None:
        overview = flink_overview(rest)
        tms, slots = overview.get("taskmanagers", 0), overview.get("slots-total", 0)
        if tms >= 1 and slots >= SLOTS:
            return None
        return f"{rest}/overview shows {tms} TaskManagers, {slots} slots (want 1, {SLOTS})"

    components = [
        Component("jobmanager", [str(home / "bin/jobmanager.sh"), "start-foreground"], env, rest,
                  jm_waiting),
        Component("taskmanager", [str(home / "bin/taskmanager.sh"), "start-foreground"], env,
                  f"{rest}/taskmanagers", tm_waiting),
    ]  # fmt: skip
    if jar:
        master = ["--flink-master", f"localhost:{settings.ports['flink_rest']}"]
        port = settings.ports["flink_job"]
        components.append(_job_server("flink", jar, state, settings, master, port))
    return components


def spark_components(
    home: Path, state: Path, settings: Settings, jar: Path | None
) -> list[Component]:
    ports = settings.ports
    master_url = f"spark://127.0.0.1:{ports['spark_master']}"
    ui = f"http://127.0.0.1:{ports['spark_ui']}"
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_CONF_DIR=str(state / "conf"),
        SPARK_LOG_DIR=str(state / "logs"),
        SPARK_PID_DIR=str(state),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="512m",
    )
    # Executors are the worker's children: they inherit Java 17's opens from here.
    worker_env = dict(env, JDK_JAVA_OPTIONS=" ".join(JAVA_FLAGS))
    spark_class = str(home / "bin/spark-class")

    def master_waiting() -> str | None:
        status = spark_master(ui).get("status")
        return None if status == "ALIVE" else f"{ui}/json/ status is {status or 'absent'}"

    def worker_waiting() -> str | None:
        info = spark_master(ui)
        workers, cores = info.get("aliveworkers", 0), info.get("cores", 0)
        if workers >= 1 and cores >= SLOTS:
            return None
        return f"{ui}/json/ shows {workers} ALIVE workers, {cores} cores (want 1, {SLOTS})"

    master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    master += ["--port", str(ports["spark_master"]), "--webui-port", str(ports["spark_ui"])]
    worker = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"]
    worker += ["--cores", str(SLOTS), "--memory", settings.memory["worker"]]
    worker += ["--webui-port", str(ports["spark_worker_ui"]), "--work-dir", str(state / "work")]
    components = [
        Component("master", master, env, f"{master_url} (UI {ui})", master_waiting),
        Component("worker", [*worker, master_url], worker_env,
                  f"http://127.0.0.1:{ports['spark_worker_ui']}", worker_waiting),
    ]  # fmt: skip
    if jar:
        args = ["--spark-master-url", master_url]
        components.append(_job_server("spark", jar, state, settings, args, ports["spark_job"]))
    return components
