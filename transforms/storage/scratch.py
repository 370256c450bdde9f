"""Local scratch folders of one process (a vocabulary build's spilled chunks): gone when
the process ends as Python sees it (a return, an error, Ctrl-C), and, when it was killed
outright (SIGKILL, the out-of-memory killer), by the next process that makes one beside
it: each is named after its host and process id, and one whose process is gone is
stale. A step puts them under its output's staging folder where that is on local disk
(a failed or committed run removes it), else under TMPDIR."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile


def scratch_folder(kind: str, under: str | None = None) -> tempfile.TemporaryDirectory[str]:
    """A new folder for this process's `kind` of scratch files, under the local folder
    `under` (default: TMPDIR), once the stale ones of killed processes are removed."""
    root = under or tempfile.gettempdir()
    os.makedirs(root, exist_ok=True)
    prefix = f"nmtpipe-{kind}-{socket.gethostname()}-"
    remove_stale(root, prefix)
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-", dir=root)


def remove_stale(root: str, prefix: str) -> None:
    """Remove the folders `PREFIX{pid}-*` in `root` whose process is gone."""
    for entry in os.scandir(root):
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        pid = entry.name.removeprefix(prefix).split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True
