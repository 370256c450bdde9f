"""Two "machines" on one: network namespaces joined by a veth pair, for multi-node tests.

Each namespace has only `lo` and its end of the veth, so a process in it reaches the
other one only at the other's address, as across real hosts; the file system and the
process ids stay shared. Making them needs root and iproute2's `ip`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass


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
def two_hosts(subnet: str = "10.233.0") -> Iterator[tuple[Host, Host]]:
    """Two namespaces, `{subnet}.1` and `{subnet}.2` on a veth between them (names unique
    to this process). Whatever happens, every process left in them is killed and both
    are removed (which removes the veth)."""
    tag = f"nmtp{os.getpid()}"
    first = Host(f"{tag}a", f"{tag}a", f"{subnet}.1")
    second = Host(f"{tag}b", f"{tag}b", f"{subnet}.2")
    hosts = (first, second)
    made: list[Host] = []
    try:
        for host in hosts:
            _ip("netns", "add", host.namespace)
            made.append(host)
        _ip("link", "add", first.interface, "type", "veth", "peer", "name", second.interface)
        for host in hosts:
            _ip("link", "set", host.interface, "netns", host.namespace)
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
            _ip("-n", host.namespace, "link", "set", host.interface, "up")
            _ip("-n", host.namespace, "link", "set", "lo", "up")
        yield first, second
    finally:
        for host in made:
            for pid in host.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for host in made:
            _ip("netns", "delete", host.namespace, check=False)
        _ip("link", "delete", first.interface, check=False)  # if it never left this one


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)
