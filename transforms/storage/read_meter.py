"""How far a Beam job has read its input, told by its workers wherever they run.

No Beam channel reports a job's progress on every runner while the job runs: the
FnApiRunner returns its result, metrics and all, only when the job has ended, and
Beam's portable result (Flink, Spark) asks the job server for a job's metrics once and
keeps the answer. What every runner's
workers share with the driver is the storage the job writes to, so each worker's
readers tell what they have read there: the file name `{reader}.{bytes}` in the run's
meter folder (an empty file, replaced as the count grows, at most once per
`PUBLISH_SECONDS`), and the driver sums the names of one listing (one request on an
object store, whatever the count of workers). A retried bundle counts its input again,
so the sum may pass the total; the display stops at the total.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from nmtpipe.transforms.storage import fsio

# How often, at most, one reader replaces its file (a worker reading a 20,000-line chunk
# a second or so writes one small file a second).
PUBLISH_SECONDS = 1.0
_NAME = re.compile(r"^([0-9a-f]{32})\.(\d+)$")


@dataclass(frozen=True)
class Meter:
    """A run's input as its workers read it: `total` bytes (the inputs' sizes known at
    planning), counted in files under `folder`, a folder of the run's own."""

    folder: str
    total: int

    def read_so_far(self) -> int:
        """The bytes every reader has said it read (one listing of `folder`)."""
        latest: dict[str, int] = {}
        for url in fsio.find(self.folder):
            found = _NAME.match(url.rsplit("/", 1)[-1])
            if found:
                reader, count = found.group(1), int(found.group(2))
                latest[reader] = max(latest.get(reader, 0), count)
        return sum(latest.values())

    def remove(self) -> None:
        fsio.remove_tree(self.folder)


class ReadCount:
    """One reader's share of a run's input (a DoFn holds one): `add` what it has read;
    `publish` at the end of a bundle. With no meter (a graph run by a test or a
    benchmark without one), nothing is told."""

    def __init__(self, meter: Meter | None) -> None:
        self.meter = meter
        self._reset()

    def _reset(self) -> None:
        self._reader = uuid.uuid4().hex  # each copy a worker unpickles counts on its own
        self._count = self._published = 0
        self._published_at = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        return {"meter": self.meter}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.meter = state["meter"]
        self._reset()

    def add(self, n: int) -> None:
        """`n` more bytes of the input read; told if the last telling is old enough."""
        self._count += n
        if time.monotonic() - self._published_at >= PUBLISH_SECONDS:
            self.publish()

    def publish(self) -> None:
        """Tell the count, if it has grown since last told; a telling that fails is
        tried again next time (progress never fails the job it watches)."""
        if self.meter is None or self._count == self._published:
            return
        folder, before, count = self.meter.folder, self._published, self._count
        try:
            fsio.write_bytes(fsio.join(folder, f"{self._reader}.{count}"), b"")
            if before:
                fsio.remove(fsio.join(folder, f"{self._reader}.{before}"))
        except Exception:
            return
        self._published, self._published_at = count, time.monotonic()
