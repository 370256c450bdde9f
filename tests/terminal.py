"""A command on a pseudo-terminal, as a person runs it in a shell: what it draws there
(progress bars are bars), and Ctrl-C as the terminal sends it."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
from pathlib import Path
from typing import IO


class Terminal:
    """A command on a pseudo-terminal of its own, as a shell runs it in the foreground:
    the terminal is its controlling terminal and its process group the foreground one,
    so ^C on it signals that whole group."""

    def __init__(
        self,
        args: list[str],
        cwd: Path,
        stdout: IO[bytes] | None = None,
        stdin: IO[bytes] | None = None,
    ) -> None:
        """`stdout`, `stdin`: where the command's go instead (redirections)."""
        self.master, slave = pty.openpty()
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
        self.name = os.ttyname(slave)
        self.proc = subprocess.Popen(
            args, stdin=stdin or slave, stdout=stdout or slave, stderr=slave, cwd=cwd,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(2, termios.TIOCSCTTY, 0),
        )  # fmt: skip
        os.close(slave)
        self.seen = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: no process has the terminal open any more
                return
            if not data:
                return
            self.seen += data

    def ctrl_c(self) -> None:
        os.write(self.master, b"\x03")

    def wait(self) -> int:
        """The command's exit code, once it has returned (as a shell's prompt would)."""
        return self.proc.wait(timeout=300)

    def holders(self) -> list[int]:
        """The processes that still have the terminal open."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
                if any(os.readlink(f"/proc/{pid}/fd/{fd}") == self.name for fd in fds):
                    found.append(int(pid))
            except OSError:  # gone meanwhile, or not ours to look at
                continue
        return found

    def output(self) -> str:
        """All it printed (read to the end: call once every holder has ended)."""
        self._reader.join(timeout=60)
        os.close(self.master)
        return self.seen.decode("utf-8", "replace").replace("\r\n", "\n")


def lines(text: str) -> list[str]:
    """What a person reads: each line as the last redraw of a bar left it."""
    return [line.rsplit("\r", 1)[-1].strip() for line in text.split("\n") if line.strip()]
