"""Headless Chromium driven over the DevTools protocol on a pipe (no extra packages).

`open_page(path)` loads a local file, collects console messages and uncaught errors,
evaluates a script in the page, and saves a screenshot: what a person would see, checked
by a test.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@dataclass
class Page:
    errors: list[str] = field(default_factory=list)  # console errors and exceptions
    value: Any = None  # what the evaluated script returned


def _high(fd: int) -> int:
    """`fd` moved to 10 or above, clear of the 3 and 4 the browser is given."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class _Pipe:
    """One CDP session over --remote-debugging-pipe (fd 3: commands, fd 4: replies)."""

    def __init__(self, browser: str, profile: str) -> None:
        to_browser, self._write = (_high(fd) for fd in os.pipe())
        self._read, from_browser = (_high(fd) for fd in os.pipe())
        args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--remote-debugging-pipe", f"--user-data-dir={profile}",
                "--window-size=1200,900", "about:blank"]  # fmt: skip
        # The browser reads fd 3 and writes fd 4: bash puts the pipes there (dash takes
        # only one-digit fds).
        shell = f'exec "$@" 3<&{to_browser} 4>&{from_browser}'
        self.proc = subprocess.Popen(
            ["bash", "-c", shell, "bash", *args],
            pass_fds=(to_browser, from_browser),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reply = self._receive()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(f"no reply to {method}")

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._write)
        os.close(self._read)


def open_page(browser: str, path: Path, script: str, screenshot: Path | None = None) -> Page:
    """Load `path`, evaluate `script` (an expression) once it has loaded, collect errors."""
    with tempfile.TemporaryDirectory() as profile:
        pipe = _Pipe(browser, profile)
        try:
            target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
            session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                pipe.send(f"{domain}.enable", session)
            pipe.send("Page.navigate", session, url=path.resolve().as_uri())
            deadline = time.monotonic() + 60
            state = ""
            while state != "complete" and time.monotonic() < deadline:
                state = pipe.send("Runtime.evaluate", session, expression="document.readyState")[
                    "result"
                ]["value"]
            page = Page()
            result = pipe.send("Runtime.evaluate", session, expression=script, returnByValue=True)
            page.value = result["result"].get("value")
            if screenshot is not None:
                shot = pipe.send("Page.captureScreenshot", session, captureBeyondViewport=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            for event in pipe.events:
                params = event.get("params", {})
                if event.get("method") == "Runtime.exceptionThrown":
                    page.errors.append(json.dumps(params["exceptionDetails"])[:300])
                elif (
                    event.get("method") == "Runtime.consoleAPICalled" and params["type"] == "error"
                ):
                    page.errors.append(json.dumps(params["args"])[:300])
                elif (
                    event.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error"
                ):
                    page.errors.append(params["entry"]["text"])
            return page
        finally:
            pipe.close()
