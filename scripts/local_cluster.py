"""`scripts/local-cluster`: a real standalone Flink or Spark cluster on 127.0.0.1, with
Beam's job server in front of it, for running nmtpipe's pipelines on a real runner.

`start flink|spark` prints on stdout, on one line, the Beam options that submit to it;
progress goes to stderr. `stop` ends exactly the process groups `start` recorded;
`status` says what runs. Python 3.10+ standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import cluster_fetch as fetch
import cluster_job_server as job_servers
from cluster_job_server import (
    DRIVER,
    FLINK_LINE,
    SHADED_ARTIFACT,
    SPARK_LINE,
    TESTED_SDK,
    JobServer,
)
from cluster_procs import (
    ClusterError,
    own_members,
    port_open,
    read_state,
    rss_mib,
    spawn,
    stop_record,
    tail,
    wait_ready,
    write_state,
)
from cluster_recipes import (
    CLUSTERS,
    DEFAULT_FLINK,
    DEFAULT_SPARK,
    ENV,
    REPO,
    SLOTS,
    Component,
    Layout,
    Settings,
    beam_options,
    cluster_lib,
    engine_jars,
    flink_components,
    flink_config,
    flink_overview,
    spark_components,
    spark_master,
)


def say(text: str) -> None:
    print(f"local-cluster: {text}", file=sys.stderr, flush=True)


# -- start, stop, status ------------------------------------------------------------------


@contextlib.contextmanager
def locked(settings: Settings, cluster: str) -> Iterator[Path]:
    """The cluster's state folder, with no other start or stop of it under way."""
    settings.state_root.mkdir(parents=True, exist_ok=True)
    with open(settings.state_root / f"{cluster}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ClusterError(f"another local-cluster start or stop of {cluster} runs") from None
        yield settings.state_root / cluster


def _submit_python(settings: Settings) -> tuple[str, str]:
    """(python, its apache-beam version): NMTPIPE_PYTHON, python on PATH, the repo's venv."""
    if settings.python:
        return settings.python, fetch.beam_version(settings.python)
    tried = []
    for candidate in (shutil.which("python"), shutil.which("python3"), REPO / ".venv/bin/python"):
        if candidate and Path(candidate).exists() and str(candidate) not in tried:
            tried.append(str(candidate))
            with contextlib.suppress(ClusterError):
                return str(candidate), fetch.beam_version(str(candidate))
    raise ClusterError(
        f"no apache-beam in {', '.join(tried) or 'any python'}; set NMTPIPE_PYTHON to the "
        "python that submits pipelines (its Beam version picks the job-server jar)"
    )


def _job_server(cluster: str, settings: Settings, python: str, beam: str) -> JobServer:
    """The job server for the Beam of `python`, which submits the jobs: the setting's, the
    cache's, else fetched (Beam's shaded jar, or one assembled by Maven); one line says
    which and from what."""
    say(f"{cluster}: apache-beam {beam} (from {python})")
    env_name = f"NMTPIPE_{cluster.upper()}_JOB_SERVER"
    if settings.job_servers[cluster]:
        server = job_servers.given(cluster, settings.job_servers[cluster], env_name)
    else:
        server = job_servers.cached(cluster, beam, settings.cache) or job_servers.fetch(
            cluster, beam, settings.cache, settings.maven_repository, env_name,
            lambda text: say(f"{cluster}: {text}"),
        )  # fmt: skip
    engine = f"{cluster.capitalize()} {server.engine or '(version unknown)'}"
    say(f"{cluster}: job server: {server.source}; built for {engine}")
    if server.path.is_file():
        main = job_servers.main_class(server.path)
        if main not in (None, DRIVER[cluster]):
            say(f"warning: {server.path} has Main-Class {main}; running {DRIVER[cluster]}")
        if beam not in server.path.name:
            say(f"warning: {server.path.name} may not be Beam {beam}: it must match the SDK")
    elif beam != TESTED_SDK:
        say(f"note: this job server was tested with apache-beam {TESTED_SDK}, not {beam}")
    return server


def _known_job_server(cluster: str, settings: Settings, beam: str | None) -> JobServer | None:
    """The job server the setting names or the cache holds, without fetching one: a worker
    host runs none, but its engine must be the head's, and a Flink worker's TaskManager
    loads Beam's libraries from it (`cluster_recipes.cluster_lib`)."""
    name = settings.job_servers[cluster]
    if name:
        return job_servers.given(cluster, name, f"NMTPIPE_{cluster.upper()}_JOB_SERVER")
    return job_servers.cached(cluster, beam or "", settings.cache)


def _pick_version(cluster: str, settings: Settings, follows: str | None) -> str:
    """The cluster's version: the setting's, else the job server's, else the default;
    a setting on another minor version than the job server's fails in one line."""
    wanted = settings.versions[cluster]
    if wanted and follows and _minor(wanted) != _minor(follows):
        name = f"NMTPIPE_{cluster.upper()}_VERSION"
        raise ClusterError(
            f"{name}={wanted} does not match the job server, built for {cluster.capitalize()} "
            f"{follows}: unset {name} or name a {_minor(follows)}.x"
        )
    return wanted or follows or (DEFAULT_FLINK if cluster == "flink" else DEFAULT_SPARK)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _require_java(compiler: bool) -> None:
    """Flink and Spark need a Java of 17 or newer (Java 17 is what is tested); a job
    server, a JDK's compiler (`JobServerLauncher.java` runs in source-file mode)."""
    major = job_servers.java_major()
    if major is None or major < 17:
        found = f"`java -version` says {major}" if major else "no `java` on PATH"
    elif compiler and not job_servers.java_compiles():
        found = "its `java` is a runtime without the compiler that the job server needs"
    else:
        return
    raise ClusterError(
        f"Flink and Spark here need a JDK 17 ({found}): install one "
        "(Debian: apt-get install openjdk-17-jdk-headless)"
    )


def _check_ports(cluster: str, settings: Settings, job_server: bool, layout: Layout) -> None:
    """Fails, naming the setting, when a port this host's processes listen on is taken."""
    names = [n for n in settings.ports if n.startswith(cluster) and (job_server or "job" not in n)]
    names += ["pool"] if layout.pools and layout.local_workers else []
    for name in names:
        if port_open(layout.spark_host(layout.address), settings.ports[name]):
            env_name = f"NMTPIPE_{name.upper()}_PORT"
            raise ClusterError(
                f"port {settings.ports[name]} ({env_name}) is already in use on "
                f"{layout.address}; stop what uses it or set {env_name}"
            )


def _dead_components(state: dict) -> list[str]:
    return [r.name for r in state["components"] if not own_members(r)]


def _require_nmtpipe(python: str) -> None:
    """The worker pool runs `python`: it must import nmtpipe, whose code the workers run."""
    found = subprocess.run([python, "-c", "import nmtpipe"], capture_output=True, check=False)
    if found.returncode != 0:
        raise ClusterError(
            f"{python} cannot import nmtpipe, whose code the worker pool runs; set "
            "NMTPIPE_PYTHON to the python of the environment where nmtpipe is installed"
        )


def start(
    cluster: str,
    settings: Settings,
    job_server: bool,
    env: dict[str, str] | None = None,
    layout: Layout | None = None,
) -> int:
    """Starts this host's part of `cluster` (`layout`) unless it runs; `env`, the
    settings it was given (NMTPIPE_*), and the layout are recorded for `restart`."""
    layout = layout or Layout()
    job_server = job_server and layout.runs_head
    with locked(settings, cluster) as folder:
        state_file = folder / "state.json"
        state = read_state(state_file)
        if state is not None:
            dead = _dead_components(state)
            if dead or not state.get("ready"):
                why = f"{', '.join(dead)} no longer runs" if dead else "that start did not finish"
                raise ClusterError(
                    f"{cluster} was started before and {why}; "
                    f"run `scripts/local-cluster stop {cluster}` first"
                )
            if job_server and not state["job_server"]:
                say(f"{cluster} runs without a job server: stop it, then start it again")
            say(f"{cluster} already runs (started {state['started']}); its options:")
            print(state["options"], flush=True)
            return 0
        _require_java(compiler=job_server)
        # The python that submits (its Beam picks the job server) and runs the worker pool.
        python, beam = _submit_python(settings) if job_server or layout.pools else (None, None)
        server = _job_server(cluster, settings, python, beam) if job_server else None
        # Beam's libraries, for a Flink cluster's class path; the head's version (a worker
        # host's): the job server's, where known.
        known = server or (None if layout.runs_head else _known_job_server(cluster, settings, beam))
        if cluster == "flink" and layout.local_workers and not layout.runs_head and not known:
            raise ClusterError(
                "a Flink worker host's TaskManager loads Beam's libraries from the head's job "
                "server, and none is cached here: set NMTPIPE_FLINK_JOB_SERVER to it (a jar, "
                "or a folder of jars)"
            )
        follows = known.engine if known else None
        if layout.pools and layout.local_workers:
            _require_nmtpipe(python)
        # The python whose Beam picked the job server: a restart picks the same one.
        settings = dataclasses.replace(settings, python=python or settings.python)
        version = _pick_version(cluster, settings, follows)
        _check_ports(cluster, settings, job_server, layout)
        began = time.monotonic()
        get_home = fetch.flink_home if cluster == "flink" else fetch.spark_home
        home = get_home(settings.cache, version, lambda text: say(f"{cluster}: {text}"))
        _fresh_state_folder(folder)
        beam_jars = job_servers.lacking(known, engine_jars(cluster, home)) if known else []
        lib = cluster_lib(cluster, home, folder, beam_jars)
        if cluster == "flink":
            (folder / "conf" / "config.yaml").write_text(flink_config(settings, folder, layout))
            for name in ("log4j-console.properties", "logback-console.xml"):
                shutil.copy(home / "conf" / name, folder / "conf" / name)
            components = flink_components(home, folder, settings, server, layout, python, lib)
        else:
            components = spark_components(home, folder, settings, server, layout, python)
        options = beam_options(cluster, settings.ports, job_server, layout)
        rest = (
            f"http://{layout.head}:{settings.ports['flink_rest']}"
            if cluster == "flink"
            else f"http://{layout.spark_host(layout.head)}:{settings.ports['spark_ui']}"
        )
        state = {
            "cluster": cluster,
            "layout": dataclasses.asdict(layout),
            "version": version,
            "home": str(home),
            "beam": beam,
            "job_server": str(server.path) if server else None,
            "job_server_source": server.source if server else None,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "options": options,
            "rest": rest,
            "components": [],
            "ready": False,  # until every component answers
            # What `restart` starts again with: the settings given, the jar and version used.
            "env": _recorded_env(cluster, env or {}, settings, server, version),
        }
        _start_components(cluster, components, folder, state, state_file, settings)
        write_state(state_file, dict(state, ready=True))
        say(f"{cluster} {version} ready in {time.monotonic() - began:.0f} s; state in {folder}")
        if not job_server and layout.runs_head:
            say(
                "no job server: Beam starts one itself from these options, fetching "
                f"{SHADED_ARTIFACT[cluster]} from Maven Central (or pass "
                f"--{cluster}_job_server_jar) and needs Java 17's --add-opens in JDK_JAVA_OPTIONS"
            )
        print(options, flush=True)
        return 0


def _recorded_env(
    cluster: str, env: dict[str, str], settings: Settings, server: JobServer | None, version: str
) -> dict[str, str]:
    """The NMTPIPE_* settings that start this cluster again as it is now."""
    recorded = {k: v for k, v in env.items() if k in ENV and v}
    recorded[f"NMTPIPE_{cluster.upper()}_VERSION"] = version
    if server is not None:
        recorded[f"NMTPIPE_{cluster.upper()}_JOB_SERVER"] = str(server.path)
    if settings.python:
        recorded["NMTPIPE_PYTHON"] = str(Path(settings.python).absolute())
    return recorded


def _fresh_state_folder(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)  # logs of the previous run only: its processes are gone
    for sub in ("conf", "logs", "tmp", "work", "artifacts"):
        (folder / sub).mkdir(parents=True)


def _start_components(
    cluster: str,
    components: list[Component],
    folder: Path,
    state: dict,
    state_file: Path,
    settings: Settings,
) -> None:
    """Starts the components in order, each answering before the next; on any failure
    (or SIGTERM, SIGHUP, Ctrl-C: see `main`) stops what was started and clears the state."""
    started = []
    try:
        for component in components:
            log = folder / "logs" / f"{component.name}.log"
            say(f"{cluster}: starting {component.name}")
            proc, record = spawn(component.name, component.argv, component.env, log, folder,
                                 component.url)  # fmt: skip
            started.append((proc, record))
            state["components"].append(record)
            write_state(state_file, state)
            took = wait_ready(component.name, proc, log, component.waiting_for, settings.timeout_s)
            say(f"{cluster}: {component.name} answers at {component.url} after {took:.0f} s")
    except BaseException:
        for proc, record in reversed(started):
            outcome = stop_record(record, settings.grace_s, proc.poll)
            say(f"{cluster}: {record.name} (pid {record.pid}) {outcome}")
        _clear_state(folder)
        raise


def _clear_state(folder: Path) -> None:
    """Removes everything but the logs, which stay for reading until the next start."""
    if not folder.exists():
        return
    for entry in folder.iterdir():
        if entry.name == "logs":
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def stop(clusters: list[str], settings: Settings) -> int:
    for cluster in clusters:
        with locked(settings, cluster) as folder:
            state = read_state(folder / "state.json")
            if state is None:
                say(f"{cluster}: not running")
                continue
            for record in reversed(state["components"]):
                outcome = stop_record(record, settings.grace_s)
                say(f"{cluster}: {record.name} (pid {record.pid}) {outcome}")
            _clear_state(folder)
            say(f"{cluster}: stopped; logs kept in {folder / 'logs'} until the next start")
    return 0


def _live_summary(state: dict) -> str | None:
    """What the cluster's own REST endpoint says about it, on one line."""
    if state["cluster"] == "flink":
        overview = flink_overview(state["rest"])
        if not overview:
            return None
        return (
            f"REST: {overview.get('taskmanagers')} TaskManager(s), "
            f"{overview.get('slots-total')} slots ({overview.get('slots-available')} free), "
            f"{overview.get('jobs-running')} jobs running, Flink {overview.get('flink-version')}"
        )
    info = spark_master(state["rest"])
    if not info:
        return None
    return (
        f"master: {info.get('status')}, {info.get('aliveworkers')} ALIVE worker(s), "
        f"{info.get('cores')} cores ({info.get('coresused')} used), "
        f"{len(info.get('activeapps', []))} running application(s)"
    )


def status(clusters: list[str], settings: Settings) -> int:
    """What runs, per component; exits 1 when a recorded process no longer runs."""
    code = 0
    for cluster in clusters:
        state = read_state(settings.state_root / cluster / "state.json")
        if state is None:
            print(f"{cluster}: not running")
            continue
        source = state.get("job_server_source")
        print(
            f"{cluster} {state['version']}: started {state['started']}"
            + (f", job server: {source}" if source else ", no job server")
            + ("" if state.get("ready") else " (starting, or a start that did not finish)")
        )
        for record in state["components"]:
            members = own_members(record)
            alive = f"alive  {rss_mib(members):6.0f} MiB RSS" if members else "DEAD"
            code = code if members else 1
            print(f"  {record.name:<12} pid {record.pid:<8} {alive:<20} {record.url}")
        summary = _live_summary(state)
        print(f"  {summary or 'does not answer on its REST endpoint'}")
        print(f"  options: {state['options']}")
    return code


def options(cluster: str, settings: Settings, as_json: bool) -> int:
    """The Beam options of a running cluster whose every component is alive; exits 1,
    saying why, otherwise. Never starts anything (tests find the clusters this way)."""
    state = read_state(settings.state_root / cluster / "state.json")
    if state is None:
        raise ClusterError(f"{cluster} is not running")
    dead = _dead_components(state)
    if dead or not state.get("ready"):
        why = f"{', '.join(dead)} no longer runs" if dead else "its start did not finish"
        raise ClusterError(f"{cluster} was started but {why}")
    if as_json:
        keys = ("cluster", "version", "options", "rest", "job_server", "started")
        found = {k: state.get(k) for k in keys}
        found["pids"] = {r.name: r.pid for r in state["components"]}  # each a process group
        print(json.dumps(found), flush=True)
    else:
        print(state["options"], flush=True)
    return 0


def restart(cluster: str, settings: Settings, environ: dict[str, str]) -> int:
    """Stops the cluster, dead components and all, and starts it again with the settings,
    job-server jar and version its state recorded (no environment needed)."""
    state = read_state(settings.state_root / cluster / "state.json")
    if state is None:
        raise ClusterError(f"{cluster} is not running: start it with `local-cluster start`")
    if "env" not in state:
        raise ClusterError(
            f"{cluster} was started by an older local-cluster that recorded no settings; "
            f"stop it and start it again"
        )
    # The recorded settings, not the environment's; but where the state is, as found.
    where = ("NMTPIPE_CLUSTER_CACHE", "NMTPIPE_CLUSTER_STATE")
    env = {k: v for k, v in environ.items() if k not in ENV or k in where}
    env.update(state["env"])
    again = Settings.from_env(env)
    if again.state_root != settings.state_root:
        raise ClusterError(f"{cluster}'s recorded settings name another state folder")
    stop([cluster], again)
    layout = Layout(**state.get("layout", {}))
    return start(cluster, again, bool(state.get("job_server")), state["env"], layout)


def build_parser() -> argparse.ArgumentParser:
    settings = "\n".join(f"  {k:<29} {h}\n  {'':<29} default: {d}" for k, (d, h) in ENV.items())
    parser = argparse.ArgumentParser(
        prog="local-cluster",
        description=(
            f"A real standalone Flink {FLINK_LINE} or Spark {SPARK_LINE} cluster on 127.0.0.1 "
            "(2 slots or cores) with Beam's job server in front of it: Beam's shaded jar from "
            "Maven Central, else one assembled by Maven from Beam's published runner "
            "libraries. Needs Java 17, and Maven where the shaded jar cannot be had. `start` "
            "and `options` print on stdout, on one line, the Beam options that submit to it; "
            f"where they fail, {not_running('CLUSTER')}, which nmtpipe refuses."
        ),
        epilog=(
            "settings (environment variables, with their defaults):\n"
            f"{settings}\n\n"
            "examples:\n"
            "  scripts/local-cluster start flink   # then: nmtpipe prepare ... $(that line)\n"
            "  scripts/local-cluster status\n"
            "  scripts/local-cluster options flink   # fails unless it runs; starts nothing\n"
            "  scripts/local-cluster restart flink   # as it was started, no settings needed\n"
            "  scripts/local-cluster stop"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    start_p = commands.add_parser("start", help="start a cluster and its job server")
    start_p.add_argument("cluster", choices=CLUSTERS)
    start_p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="N TaskManagers or workers, and a Beam worker pool beside them: the options "
        "then name --environment_type=EXTERNAL, and the Python work runs in the pool's "
        "processes, not in the submitting one (without it: one worker, LOOPBACK); with "
        "--role head, the worker hosts there will be",
    )
    start_p.add_argument(
        "--slots",
        type=int,
        metavar="K",
        help=f"task slots or cores per worker (default: {SLOTS} over the workers on this "
        f"host, at least 1; {SLOTS} on a worker host)",
    )
    start_p.add_argument(
        "--role",
        choices=("all", "head", "worker"),
        default="all",
        help="all: everything on this host (default); head: the JobManager or master and "
        "the job server, at --address; worker: a TaskManager or worker and a worker pool at "
        "--address, for the head at --head",
    )
    start_p.add_argument("--address", help="this host's address (--role head or worker)")
    start_p.add_argument("--head", help="the head's address (--role worker)")
    start_p.add_argument(
        "--no-job-server",
        action="store_true",
        help="start the cluster only; the options then name FlinkRunner or SparkRunner, "
        "which start a job server themselves",
    )
    for name, text in (("stop", "stop what start started"), ("status", "say what runs")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("cluster", nargs="?", choices=CLUSTERS, help="both when left out")
    options_p = commands.add_parser(
        "options", help="print a running cluster's Beam options (exit 1 unless all of it runs)"
    )
    options_p.add_argument("cluster", choices=CLUSTERS)
    options_p.add_argument(
        "--json", action="store_true", help="its options, REST URL, version and pids as JSON"
    )
    restart_p = commands.add_parser(
        "restart", help="stop a started cluster and start it as it was started"
    )
    restart_p.add_argument("cluster", choices=CLUSTERS)
    for sub in (start_p, restart_p):
        sub.set_defaults(json=False)
    return parser


def layout_of(args: argparse.Namespace) -> Layout:
    """This host's part of the cluster, from `start`'s flags; a wrong mix is one line."""
    if args.role == "all":
        if args.address or args.head:
            raise ClusterError("--address and --head go with --role head or worker")
        if args.workers is None:
            return Layout(slots=args.slots or SLOTS)
        workers = _at_least_one("--workers", args.workers)
        slots = args.slots or max(1, SLOTS // workers)
        return Layout(workers=workers, slots=_at_least_one("--slots", slots), pools=True)
    if not args.address:
        raise ClusterError(f"--role {args.role} needs --address, this host's address")
    if args.role == "head":
        if args.head:
            raise ClusterError("--head goes with --role worker (the head is --address)")
        workers = _at_least_one("--workers", args.workers or 1)
        slots = _at_least_one("--slots", args.slots or SLOTS)
        return Layout("head", args.address, args.address, workers, slots, pools=True)
    if not args.head:
        raise ClusterError("--role worker needs --head, the head's address")
    if args.workers is not None:
        raise ClusterError("--workers goes with --role all or head (a worker host runs one)")
    slots = _at_least_one("--slots", args.slots or SLOTS)
    return Layout("worker", args.address, args.head, 1, slots, pools=True)


def _at_least_one(flag: str, value: int) -> int:
    if value < 1:
        raise ClusterError(f"{flag} must be at least 1, not {value}")
    return value


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def not_running(cluster: str) -> str:
    """What `start`, `restart` and `options` print on stdout when they fail, in place of the
    options: an option nmtpipe refuses (exit 2, one line), so that `nmtpipe prepare ...
    $(scripts/local-cluster options flink)` stops instead of running on the local runner."""
    return f"--{cluster.lower()}-cluster-is-not-running"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code = _run(args)
    if code != 0 and args.command in ("start", "restart", "options") and not args.json:
        print(not_running(args.cluster), flush=True)
    return code


def _run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env(os.environ)
        if args.command == "options":
            return options(args.cluster, settings, args.json)
        if args.command in ("start", "restart"):
            # A start that is told to end stops what it started (and removes partial
            # downloads) on the way out, as after Ctrl-C.
            for signum in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, _interrupted)
            if args.command == "restart":
                return restart(args.cluster, settings, dict(os.environ))
            given = {k: v for k, v in os.environ.items() if k in ENV}
            layout = layout_of(args)
            return start(args.cluster, settings, not args.no_job_server, given, layout)
        clusters = [args.cluster] if args.cluster else list(CLUSTERS)
        return (stop if args.command == "stop" else status)(clusters, settings)
    except ClusterError as e:
        say(f"error: {e}")
        if e.log is not None:
            print(f"  last lines of {e.log}:\n{tail(e.log)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        say(f"interrupted ({e or 'Ctrl-C'}); stopped what had started")
        return 130
