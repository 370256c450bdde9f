"""Processes of `scripts/local-cluster`: start in a group of their own, record, probe, stop.

Every component runs in a new session (its pid is its process group), so a stop reaches
the JVM and whatever it forked (a Spark worker's executors) and nothing else. A record
keeps the pid's start time: a pid that the kernel gave to another process since is left
alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path


class ClusterError(Exception):
    """A failure the user can act on; its message is the one line they read."""

    def __init__(self, message: str, log: Path | None = None) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Record:
    """One started component, as the state file keeps it."""

    name: str
    pid: int
    starttime: int  # /proc/<pid>/stat field 22: tells a reused pid apart
    log: str
    url: str


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    pgrp: int
    starttime: int
    cpu_s: float  # utime + stime
    ppid: int


_TICKS = os.sysconf("SC_CLK_TCK")


def proc_stat(pid: int) -> ProcStat | None:
    """The kernel's view of `pid` (None when there is no such process)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / _TICKS
    return ProcStat(pid, fields[0], int(fields[2]), int(fields[19]), cpu_s, int(fields[1]))


def _live() -> list[ProcStat]:
    found = (proc_stat(int(e.name)) for e in os.scandir("/proc") if e.name.isdigit())
    return [stat for stat in found if stat and stat.state not in ("Z", "X")]


def group_members(pgid: int) -> list[ProcStat]:
    """Live (non-zombie) processes of process group `pgid`."""
    return [stat for stat in _live() if stat.pgrp == pgid]


def tree_members(pgid: int) -> list[ProcStat]:
    """The live processes of group `pgid` and all their descendants, whatever group or
    session those chose (a worker pool's fork server and its workers run in a session
    of their own)."""
    live = _live()
    pids = {stat.pid for stat in live if stat.pgrp == pgid}
    grew = True
    while grew:
        more = {stat.pid for stat in live if stat.ppid in pids} - pids
        pids |= more
        grew = bool(more)
    return [stat for stat in live if stat.pid in pids]


def own_members(record: Record) -> list[ProcStat]:
    """The live processes of `record`'s group, or [] when its pid now names another process.

    Linux allocates no pid that is still a process group id, so while any member of our
    group lives, the group id is ours; a leader with another start time means our group
    died out and the pid was reused.
    """
    leader = proc_stat(record.pid)
    if leader is not None and leader.starttime != record.starttime:
        return []
    return group_members(record.pid)


def rss_mib(members: list[ProcStat]) -> float:
    total_kib = 0
    for member in members:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
    return total_kib / 1024


def spawn(
    name: str, argv: list[str], env: dict[str, str], log: Path, cwd: Path, url: str
) -> tuple[subprocess.Popen, Record]:
    """Start `argv` in a session of its own, stdout and stderr appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    stat = proc_stat(proc.pid)
    starttime = stat.starttime if stat else 0
    return proc, Record(name, proc.pid, starttime, str(log), url)


def stop_record(record: Record, grace_s: float, wait: Callable[[], None] | None = None) -> str:
    """SIGTERM to the record's group, SIGKILL after `grace_s`; says what happened."""
    members = own_members(record)
    if not members:
        return "had already exited"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if wait:
            wait()  # reaps our own children, which would linger as zombies
        if not own_members(record):
            return "stopped"
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while own_members(record) and time.monotonic() < deadline:
        if wait:
            wait()
        time.sleep(0.2)
    return f"killed after {grace_s:g} s" if not own_members(record) else "did not die"


# -- the state file -----------------------------------------------------------------------


def read_state(path: Path) -> dict | None:
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ClusterError(f"unreadable state file {path} ({e}); remove it by hand") from e
    state["components"] = [Record(**c) for c in state.get("components", [])]
    return state


def write_state(path: Path, state: dict) -> None:
    data = dict(state, components=[asdict(r) for r in state["components"]])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


# -- probes -------------------------------------------------------------------------------


def get_json(url: str, timeout: float = 3) -> dict | list | None:
    """The JSON at `url`, or None while nothing (or something else) answers there."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.load(response)
    except (OSError, ValueError, urllib.error.URLError):
        return None


def port_open(host: str, port: int, timeout: float = 1) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"    (no log at {path})"
    last = text.splitlines()[-lines:] or ["(empty)"]
    return "\n".join("    " + line for line in last)


def wait_ready(
    name: str,
    proc: subprocess.Popen,
    log: Path,
    waiting_for: Callable[[], str | None],
    timeout_s: float,
) -> float:
    """Polls until `waiting_for()` says nothing is missing; returns the seconds it took.

    Fails at once when the process exits, and after `timeout_s` with what was missing.
    """
    start = time.monotonic()
    while True:
        rc = proc.poll()
        if rc is not None:
            raise ClusterError(f"{name} exited with code {rc} while starting", log)
        missing = waiting_for()
        if missing is None:
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise ClusterError(f"{name} not ready after {timeout_s:g} s: {missing}", log)
        time.sleep(0.5)
