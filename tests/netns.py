"""Several "machines" on one: network namespaces on one switch, for multi-node tests.

Each namespace has only `lo` and its end of the veth, so a process in it reaches the
other one only at the other's address, as across real hosts; the file system and the
process ids stay shared. Making them needs root and iproute2's `ip`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Host:
    namespace: str
    interface: str  # its end of the veth
    address: str

    def command(self, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        """`argv` run in this host's namespace, with `env` added to the environment."""
        extra = [f"{key}={value}" for key, value in (env or {}).items()]
        return ["ip", "netns", "exec", self.namespace, "env", *extra, *argv]

    def pids(self) -> list[int]:
        """Every process in this host's namespace (whoever started it)."""
        out = _ip("netns", "pids", self.namespace, check=False).stdout
        return [int(pid) for pid in out.split()]


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "no `ip` (iproute2) to make network namespaces"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    return None


@contextlib.contextmanager
def hosts(count: int, subnet: str = "10.233.0") -> Iterator[tuple[Host, ...]]:
    """`count` namespaces at `{subnet}.1`, `{subnet}.2`, ... (names unique to this
    process), on one switch: a bridge in the first, which is its interface, and a veth
    from each other one to it. Whatever happens, every process left in them is killed
    and all are removed (which removes the bridge and the veths)."""
    _remove_stale()
    tag = f"nmtp{os.getpid()}"
    made: list[Host] = []
    try:
        for k in range(count):
            host = Host(f"{tag}{chr(97 + k)}", f"{tag}{chr(97 + k)}", f"{subnet}.{k + 1}")
            _ip("netns", "add", host.namespace)
            made.append(host)
            _ip("-n", host.namespace, "link", "set", "lo", "up")
        switch = made[0]
        _ip("-n", switch.namespace, "link", "add", switch.interface, "type", "bridge")
        for host in made[1:]:
            port = f"{host.interface}p"  # the switch's end of this host's veth
            _ip("link", "add", host.interface, "type", "veth", "peer", "name", port)
            _ip("link", "set", host.interface, "netns", host.namespace)
            _ip("link", "set", port, "netns", switch.namespace)
            _ip("-n", switch.namespace, "link", "set", port, "master", switch.interface, "up")
        for host in made:
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
            _ip("-n", host.namespace, "link", "set", host.interface, "up")
        yield tuple(made)
    finally:
        for host in made:
            for pid in host.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for host in made:
            _ip("netns", "delete", host.namespace, check=False)
            _ip("link", "delete", host.interface, check=False)  # if it never left this one


@contextlib.contextmanager
def two_hosts(subnet: str = "10.233.0") -> Iterator[tuple[Host, Host]]:
    """Two of `hosts`."""
    with hosts(2, subnet) as (first, second):
        yield first, second


def _remove_stale() -> None:
    """Removes the namespaces, and kills the processes in them, of test runs that died
    without removing them (a run killed at its timeout runs no teardown)."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        found = re.fullmatch(r"nmtp(\d+)[a-z]", name)
        if found is None or Path(f"/proc/{found.group(1)}").exists():
            continue
        for pid in Host(name, name, "").pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _ip("netns", "delete", name, check=False)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)
