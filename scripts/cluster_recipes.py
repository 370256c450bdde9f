"""What `scripts/local-cluster` runs: its settings, and each cluster's processes.

Flink (a JobManager and TaskManagers) and Spark (a master and workers) of the versions
their Beam job server was built for (`cluster_job_server`), each with that job server in
front; the Beam options that submit to them. A `Layout` says which of those run on this
host: all of them (one host), or the head (JobManager or master, job server) here and the
workers on other hosts, each beside a Beam worker pool.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cluster_job_server import (
    ASSEMBLIES,
    DRIVER,
    FLINK_LINE,
    MAVEN_CENTRAL,
    SHADED_ARTIFACT,
    SPARK_LINE,
    JobServer,
)
from cluster_procs import ClusterError, get_json, port_open

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = Path(__file__).resolve().parent / "JobServerLauncher.java"
CLUSTERS = ("flink", "spark")
SLOTS = 2  # Flink task slots, Spark worker cores: the machine's 2 cores
# Without a job server to follow (--no-job-server; a worker host that finds none): the
# versions the assembled job servers run, the tested ones.
DEFAULT_FLINK, DEFAULT_SPARK = "1.19.0", "3.5.6"

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
        "the python that submits pipelines: its apache-beam version picks the shaded jar",
    ),
    "NMTPIPE_FLINK_VERSION": (
        f"the job server's Flink, else {DEFAULT_FLINK}",
        f"Flink from PyPI (apache-flink, apache-flink-libraries); a {FLINK_LINE}.x for "
        "the default job server",
    ),
    "NMTPIPE_SPARK_VERSION": (
        f"the job server's Spark, else {DEFAULT_SPARK}",
        f"Spark from PyPI (pyspark); a {SPARK_LINE}.x for the default job server",
    ),
    "NMTPIPE_FLINK_JOB_SERVER": (
        f"<cache>/jars/{SHADED_ARTIFACT['flink']}-<beam>.jar, else "
        f"<cache>/job-servers/{ASSEMBLIES['flink'].name}/lib",
        "a Flink job server to use: a jar, or a folder of jars (run with java -cp)",
    ),
    "NMTPIPE_SPARK_JOB_SERVER": (
        f"<cache>/jars/{SHADED_ARTIFACT['spark']}-<beam>.jar, else "
        f"<cache>/job-servers/{ASSEMBLIES['spark'].name}/lib",
        "a Spark job server to use: a jar, or a folder of jars (run with java -cp)",
    ),
    "NMTPIPE_MAVEN_REPOSITORY": (
        MAVEN_CENTRAL,
        "where Beam's shaded job-server jar is downloaded from, as Beam's SDK does",
    ),
    "NMTPIPE_FLINK_REST_PORT": ("8081", "Flink REST API and web UI"),
    "NMTPIPE_FLINK_RPC_PORT": ("6123", "Flink JobManager RPC"),
    "NMTPIPE_FLINK_JOB_PORT": ("8099", "Beam job service in front of Flink"),
    "NMTPIPE_SPARK_MASTER_PORT": ("7077", "Spark master"),
    "NMTPIPE_SPARK_UI_PORT": ("8080", "Spark master web UI (/json/)"),
    "NMTPIPE_SPARK_WORKER_UI_PORT": ("8082", "Spark worker web UI"),
    "NMTPIPE_SPARK_JOB_PORT": ("8097", "Beam job service in front of Spark"),
    "NMTPIPE_POOL_PORT": ("50000", "Beam worker pool beside the workers (EXTERNAL)"),
    "NMTPIPE_FLINK_JM_MEMORY": ("1024m", "Flink JobManager process size"),
    "NMTPIPE_FLINK_TM_MEMORY": ("4096m", "Flink TaskManager process size"),
    "NMTPIPE_SPARK_WORKER_MEMORY": ("2g", "memory the Spark worker gives executors"),
    "NMTPIPE_JOB_SERVER_HEAP": ("1g", "-Xmx of a job server (the Spark driver)"),
    "NMTPIPE_CLUSTER_TIMEOUT": ("180", "seconds each process may take to answer"),
    "NMTPIPE_CLUSTER_STOP_GRACE": ("20", "seconds between SIGTERM and SIGKILL"),
}
# Java 17 keeps JDK internals closed; Flink (its shipped env.java.opts.all) and Spark
# (launcher JavaModuleOptions) open these. The job servers are the Flink client and the
# Spark driver, started by plain `java`, so they get the union too.
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
    job_servers: dict[str, str | None]
    maven_repository: str
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
            job_servers={c: env.get(f"NMTPIPE_{c.upper()}_JOB_SERVER") or None for c in CLUSTERS},
            maven_repository=get("NMTPIPE_MAVEN_REPOSITORY"),
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


@dataclass(frozen=True)
class Layout:
    """Which of a cluster's processes run on this host, and where they listen.

    role "all": the head and `workers` workers here (one host); "head": the JobManager or
    master and the job server; "worker": one TaskManager or Spark worker for the head at
    `head`. With `pools`, a Beam worker pool runs beside this host's workers and jobs
    name `--environment_type=EXTERNAL`; without, `LOOPBACK` (the submitting process
    runs the Python work).
    """

    role: str = "all"
    address: str = "localhost"  # this host's, where its processes listen
    head: str = "localhost"  # where the JobManager or master and the job server listen
    workers: int = 1  # here ("all"), or the worker hosts there will be ("head")
    slots: int = SLOTS  # task slots or cores per worker
    pools: bool = False

    @property
    def runs_head(self) -> bool:
        return self.role in ("all", "head")

    @property
    def local_workers(self) -> int:
        return {"all": self.workers, "head": 0, "worker": 1}[self.role]

    def spark_host(self, address: str) -> str:
        """Spark binds IP addresses: `localhost` is 127.0.0.1 to it."""
        return "127.0.0.1" if address == "localhost" else address


def beam_options(cluster: str, ports: dict[str, int], job_server: bool, layout: Layout) -> str:
    """The Beam options that submit to the cluster, on one line.

    LOOPBACK: the submitting process hosts the SDK workers, which the TaskManager or
    executor on this host reaches on localhost. EXTERNAL: each TaskManager or executor
    asks the worker pool on its own host (`localhost:<pool port>` there) for a worker
    process per slot (`--sdk_worker_parallelism`).
    """
    head = layout.head if cluster == "flink" else layout.spark_host(layout.head)
    if job_server:
        port = ports[f"{cluster}_job"]
        words = [f"--runner=PortableRunner --job_endpoint={layout.head}:{port}"]
    elif cluster == "flink":
        words = [f"--runner=FlinkRunner --flink_master={head}:{ports['flink_rest']}",
                 f"--flink_version={FLINK_LINE}"]  # fmt: skip
    else:
        words = ["--runner=SparkRunner", f"--spark_master_url=spark://{head}:"
                 f"{ports['spark_master']}", "--spark_version=3"]  # fmt: skip
    if layout.pools:
        words += ["--environment_type=EXTERNAL", f"--environment_config=localhost:{ports['pool']}",
                  f"--sdk_worker_parallelism={layout.slots}"]  # fmt: skip
    else:
        words.append("--environment_type=LOOPBACK")
    if cluster == "flink":
        words.append(f"--parallelism={layout.workers * layout.slots}")
    return " ".join(words)


def flink_config(settings: Settings, state: Path, layout: Layout) -> str:
    """conf/config.yaml of this host's Flink processes: small, `layout.slots` per worker."""
    ports = settings.ports
    # One host keeps to loopback; on several, every process listens on all of its host's
    # addresses: the JobManager's REST handler hands jobs to its blob server at
    # localhost, whatever address the JobManager binds.
    bind = layout.address if layout.role == "all" else "0.0.0.0"
    values = {
        "jobmanager.rpc.address": layout.head,
        "jobmanager.rpc.port": ports["flink_rpc"],
        "jobmanager.bind-host": bind,
        "jobmanager.memory.process.size": settings.memory["jm"],
        "jobmanager.execution.failover-strategy": "region",
        # On a busy 2-core machine a TaskManager took longer than the default 10 s to
        # accept a task (the job failed "not responding after a rpcTimeout").
        "pekko.ask.timeout": "60 s",
        "taskmanager.host": layout.address,
        "taskmanager.bind-host": bind,
        "taskmanager.numberOfTaskSlots": layout.slots,
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
        "parallelism.default": layout.workers * layout.slots,
        "rest.address": layout.head,
        "rest.bind-address": bind,
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
    cluster: str, server: JobServer, state: Path, settings: Settings, master_args: list[str],
    layout: Layout,
) -> Component:  # fmt: skip
    port = settings.ports[f"{cluster}_job"]
    argv = [shutil.which("java") or "java", *JAVA_FLAGS, f"-Xmx{settings.memory['job_server']}"]
    argv.append(f"-Djava.io.tmpdir={state / 'tmp'}")
    if cluster == "spark":  # as Spark's launcher sets it for a driver on Java 17+
        argv.append("-Djdk.reflect.useDirectMethodHandle=false")
        # Each job is an application of its own whose executors start with it: without
        # waiting for all of them, the first to register ran a small job's every task
        # and the other workers none (SparkConf reads spark.* system properties).
        cores = layout.workers * layout.slots
        argv += [f"-Dspark.cores.max={cores}", "-Dspark.scheduler.minRegisteredResourcesRatio=1",
                 "-Dspark.scheduler.maxRegisteredResourcesWaitingTime=60s"]  # fmt: skip
        # An executor gets the memory its worker offers: with Spark's default 1 GB one
        # died of OutOfMemoryError (exit 52) in a 1M-pair prepare, and with it the cached
        # partitions and shuffle files of every stage before, which Spark then ran again
        # from the start (all of the job's Python work twice).
        argv.append(f"-Dspark.executor.memory={settings.memory['worker']}")
        # Beam's libraries on the executors' class path (the cluster's, `cluster_lib`).
        argv.append(f"-Dspark.executor.extraClassPath={state / 'lib'}/*")
    # Beam's libraries are on the cluster already: jobs carry none.
    argv += ["-cp", server.classpath, "-Dstage.classpath=", str(LAUNCHER)]
    argv += [DRIVER[cluster], *master_args]
    argv += ["--job-host", layout.head, "--job-port", str(port)]
    argv += ["--artifact-port", "0", "--expansion-port", "0"]
    argv += ["--artifacts-dir", str(state / "artifacts")]
    env = dict(os.environ, SPARK_LOCAL_IP=layout.spark_host(layout.head))
    env.pop("JDK_JAVA_OPTIONS", None)
    return Component(
        "job-server",
        argv,
        env,
        f"{layout.head}:{port}",
        lambda: None if port_open(layout.head, port) else f"port {port} does not accept yet",
    )


def worker_pool(python: str, settings: Settings) -> Component:
    """nmtpipe's Beam worker pool on this host (`nmtpipe.pipelines.beam.worker_pool`): an
    SDK worker process, running `python`, for each one a TaskManager or executor here
    asks for."""
    port = settings.ports["pool"]
    argv = [python, "-m", "nmtpipe.pipelines.beam.worker_pool", f"--port={port}"]
    return Component(
        "worker-pool",
        argv,
        dict(os.environ),
        f"localhost:{port}",
        lambda: None if port_open("localhost", port) else f"port {port} does not accept yet",
    )


def engine_jars(cluster: str, home: Path) -> list[Path]:
    """The jars an engine's own processes load: Flink's lib/, Spark's jars/."""
    return sorted((home / ("lib" if cluster == "flink" else "jars")).glob("*.jar"))


def cluster_lib(cluster: str, home: Path, state: Path, beam_jars: list[Path]) -> Path:
    """The folder of jars that the cluster's processes add to their class path: links to
    Beam's libraries that the engine lacks (`cluster_job_server.lacking`), and for Flink,
    whose lib/ it replaces (FLINK_LIB_DIR), to Flink's own. The JobManager and
    TaskManagers, or Spark's executors, load Beam's classes from here, and no job
    carries them (`JobServerLauncher.java`)."""
    lib = state / "lib"
    lib.mkdir()
    for jar in [*(engine_jars(cluster, home) if cluster == "flink" else []), *beam_jars]:
        (lib / jar.name).symlink_to(jar)
    return lib


def flink_components(
    home: Path, state: Path, settings: Settings, server: JobServer | None, layout: Layout,
    python: str | None, lib: Path,
) -> list[Component]:  # fmt: skip
    rest = f"http://{layout.head}:{settings.ports['flink_rest']}"
    env = dict(
        os.environ,
        FLINK_HOME=str(home),
        FLINK_CONF_DIR=str(state / "conf"),
        FLINK_LOG_DIR=str(state / "logs"),
        FLINK_PID_DIR=str(state),
        FLINK_LIB_DIR=str(lib),
    )

    def jm_waiting() -> str | None:
        return None if flink_overview(rest) else f"{rest}/overview does not answer yet"

    def tm_waiting(wanted: int) -> Callable[[], str | None]:
        def waiting() -> str | None:
            found = get_json(f"{rest}/taskmanagers")
            ours = [t for t in (found or {}).get("taskmanagers", []) if _on(t, layout.address)]
            if len(ours) >= wanted and all(t.get("slotsNumber") == layout.slots for t in ours):
                return None
            return f"{rest}/taskmanagers lists {len(ours)} of {wanted} from {layout.address}"

        return waiting

    components = []
    if layout.runs_head:
        components.append(Component("jobmanager", [str(home / "bin/jobmanager.sh"),
                                    "start-foreground"], env, rest, jm_waiting))  # fmt: skip
    for k in range(layout.local_workers):
        name = "taskmanager" if layout.local_workers == 1 else f"taskmanager-{k + 1}"
        components.append(Component(name, [str(home / "bin/taskmanager.sh"), "start-foreground"],
                                    env, f"{rest}/taskmanagers", tm_waiting(k + 1)))  # fmt: skip
    if layout.pools and layout.local_workers:
        components.append(worker_pool(python or sys.executable, settings))
    if server and layout.runs_head:
        master = ["--flink-master", f"{layout.head}:{settings.ports['flink_rest']}"]
        components.append(_job_server("flink", server, state, settings, master, layout))
    return components


def _on(taskmanager: dict, address: str) -> bool:
    """Whether a TaskManager of Flink's REST listing runs at `address`."""
    path = taskmanager.get("path", "")
    return f"@{address}:" in path or (address == "localhost" and "@127.0.0.1:" in path)


def spark_components(
    home: Path, state: Path, settings: Settings, server: JobServer | None, layout: Layout,
    python: str | None,
) -> list[Component]:  # fmt: skip
    ports = settings.ports
    head, here = layout.spark_host(layout.head), layout.spark_host(layout.address)
    master_url = f"spark://{head}:{ports['spark_master']}"
    ui = f"http://{head}:{ports['spark_ui']}"
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_CONF_DIR=str(state / "conf"),
        SPARK_LOG_DIR=str(state / "logs"),
        SPARK_PID_DIR=str(state),
        SPARK_LOCAL_IP=here,
        SPARK_DAEMON_MEMORY="512m",
    )
    # Executors are the worker's children: they inherit Java 17's opens from here.
    worker_env = dict(env, JDK_JAVA_OPTIONS=" ".join(JAVA_FLAGS))
    spark_class = str(home / "bin/spark-class")

    def master_waiting() -> str | None:
        status = spark_master(ui).get("status")
        return None if status == "ALIVE" else f"{ui}/json/ status is {status or 'absent'}"

    def worker_waiting(wanted: int) -> Callable[[], str | None]:
        def waiting() -> str | None:
            workers = spark_master(ui).get("workers", [])
            ours = [w for w in workers if w.get("host") == here and w.get("state") == "ALIVE"]
            if len(ours) >= wanted and all(w.get("cores") == layout.slots for w in ours):
                return None
            return f"{ui}/json/ shows {len(ours)} of {wanted} ALIVE workers on {here}"

        return waiting

    components = []
    if layout.runs_head:
        master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", head]
        master += ["--port", str(ports["spark_master"]), "--webui-port", str(ports["spark_ui"])]
        components.append(
            Component("master", master, env, f"{master_url} (UI {ui})", master_waiting)
        )
    for k in range(layout.local_workers):
        name = "worker" if layout.local_workers == 1 else f"worker-{k + 1}"
        worker = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", here]
        worker += ["--cores", str(layout.slots), "--memory", settings.memory["worker"]]
        worker += ["--webui-port", str(ports["spark_worker_ui"] + k)]
        worker += ["--work-dir", str(state / "work" / name), master_url]
        url = f"http://{here}:{ports['spark_worker_ui'] + k}"
        components.append(Component(name, worker, worker_env, url, worker_waiting(k + 1)))
    if layout.pools and layout.local_workers:
        components.append(worker_pool(python or sys.executable, settings))
    if server and layout.runs_head:
        args = ["--spark-master-url", master_url]
        components.append(_job_server("spark", server, state, settings, args, layout))
    return components
