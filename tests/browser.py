"""Headless Chromium driven over the DevTools protocol on a pipe (no extra packages).

`open_page(path)` loads a local file, collects console messages and uncaught errors,
evaluates a script in the page, and saves a screenshot: what a person would see, checked
by a test. `Browser` does the same for many pages in one browser, at a set window size,
and records every URL a page fetched.
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


def require_browser() -> str:
    """The headless Chromium a browser test drives; the test skips, saying why, without."""
    import pytest

    browser = find_browser()
    if browser is None:
        pytest.skip("no headless Chromium here (.ci/run installs Debian's chromium package)")
    return browser


@dataclass
class Page:
    errors: list[str] = field(default_factory=list)  # console errors and exceptions
    value: Any = None  # what the evaluated script returned
    fetched: list[str] = field(default_factory=list)  # every URL requested (with Browser)


def _high(fd: int) -> int:
    """`fd` moved to 10 or above, clear of the 3 and 4 the browser is given."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class _Pipe:
    """One CDP session over --remote-debugging-pipe (fd 3: commands, fd 4: replies)."""

    def __init__(self, browser: str, profile: str, size: tuple[int, int] = (1200, 900)) -> None:
        to_browser, self._write = (_high(fd) for fd in os.pipe())
        self._read, from_browser = (_high(fd) for fd in os.pipe())
        args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--remote-debugging-pipe", f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}", "about:blank"]  # fmt: skip
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

    def wait_for(self, method: str, session: str, seconds: float = 60) -> None:
        """Read until the event `method` of `session` comes (kept in `events` too)."""
        if any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            return
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            event = self._receive()
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return
        raise TimeoutError(f"no {method}")

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


def _errors(events: list[dict[str, Any]]) -> list[str]:
    errors = []
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "Runtime.exceptionThrown":
            errors.append(json.dumps(params["exceptionDetails"])[:300])
        elif event.get("method") == "Runtime.consoleAPICalled" and params["type"] == "error":
            errors.append(json.dumps(params["args"])[:300])
        elif event.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(params["entry"]["text"])
    return errors


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
            page.errors = _errors(pipe.events)
            return page
        finally:
            pipe.close()


class Browser:
    """One headless Chromium with one tab, `width` x `height`, for many pages in turn."""

    def __init__(self, browser: str, width: int = 1280, height: int = 800) -> None:
        self._profile = tempfile.TemporaryDirectory()
        self._pipe = _Pipe(browser, self._profile.name, (width, height))
        try:
            target = self._pipe.send("Target.createTarget", url="about:blank")["targetId"]
            self._session = self._pipe.send("Target.attachToTarget", targetId=target, flatten=True)[
                "sessionId"
            ]
            for domain in ("Runtime", "Log", "Page", "Network"):
                self._pipe.send(f"{domain}.enable", self._session)
            # The layout viewport exactly this size, whatever the window's frame takes.
            self._pipe.send(
                "Emulation.setDeviceMetricsOverride",
                self._session,
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pipe.close()
        self._profile.cleanup()

    def evaluate(self, script: str, wait: bool = False) -> Any:
        """`script`'s value; with `wait`, the value of the promise it returns."""
        result = self._pipe.send(
            "Runtime.evaluate",
            self._session,
            expression=script,
            returnByValue=True,
            awaitPromise=wait,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(json.dumps(result["exceptionDetails"])[:500])
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """The viewport as it is now into `path`, a PNG."""
        shot = self._pipe.send("Page.captureScreenshot", self._session)
        path.write_bytes(base64.b64decode(shot["data"]))

    def open(self, url: str, script: str, screenshot: Path | None = None) -> Page:
        """Load `url` (waiting for its load event), evaluate `script`, screenshot the
        viewport; the errors and fetches are this page's alone."""
        self._pipe.events.clear()
        self._pipe.send("Page.navigate", self._session, url=url)
        self._pipe.wait_for("Page.loadEventFired", self._session)
        page = Page(value=self.evaluate(script))
        if screenshot is not None:
            self.screenshot(screenshot)
        page.errors = _errors(self._pipe.events)
        page.fetched = [
            event["params"]["request"]["url"]
            for event in self._pipe.events
            if event.get("method") == "Network.requestWillBeSent"
        ]
        return page
