"""A Beam job's progress as its readers count it, seen by the driver while the job
runs, on the local runners: in this process and in forked worker processes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest

from nmtpipe.pipelines.beam.options import pipeline_options, run_branches
from nmtpipe.transforms import progress
from nmtpipe.transforms.storage import read_meter
from nmtpipe.transforms.storage.read_meter import Meter, ReadCount

ITEMS, SIZE = 4, 1000


class Seen(progress.Display):
    """A display that records what the bar showed, and writes the last count shown to
    a file every process of the job sees."""

    def __init__(self, flag: Path) -> None:
        self.flag, self.shown, self.bars = flag, [], []

    def bar(self, what: str, total: int | None, unit: str, initial: int, stream: Any) -> Any:
        display = self

        class Bar:
            period = 0.05
            n = 0

            def update(self, n: int, **figures: Any) -> None:
                self.n += n
                display.shown.append(self.n)
                display.flag.write_text(str(self.n))

            def close(self, finished: bool) -> None:
                pass

        self.bars.append((what, total, unit))
        return Bar()


class ReadFn(beam.DoFn):
    """Reads `SIZE` bytes an item, then waits until the driver has shown at least what
    it has read so far: so the display must show the input read while the job runs
    (none of the last items is read before it has), with no timing."""

    def __init__(self, meter: Meter, flag: str) -> None:
        self.count, self.flag = ReadCount(meter), flag
        self.read = 0

    def process(self, item: int) -> Iterator[int]:
        self.count.add(SIZE)
        self.count.publish()
        self.read += SIZE
        deadline = time.monotonic() + 120
        while not self._shown() >= self.read:
            assert time.monotonic() < deadline, "the driver never showed the input read"
            time.sleep(0.02)
        yield item

    def _shown(self) -> int:
        try:
            return int(Path(self.flag).read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0


class Read(beam.PTransform):
    def __init__(self, meter: Meter, flag: str) -> None:
        super().__init__()
        self.meter, self.flag = meter, flag

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | beam.Create(range(ITEMS))
            | beam.Reshuffle()
            | beam.ParDo(ReadFn(self.meter, self.flag))
        )


@pytest.mark.parametrize(
    "mode",
    [
        ["--direct_running_mode=in_memory", "--direct_num_workers=1"],
        ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    ],
    ids=["in-process", "forked-workers"],
)
def test_the_driver_shows_the_input_read_while_the_job_runs(tmp_path, monkeypatch, mode):
    monkeypatch.setattr(read_meter, "PUBLISH_SECONDS", 0.0)
    flag = tmp_path / "seen"
    shown = Seen(flag)
    before = progress.installed()
    progress.install(shown)
    try:
        meter = Meter(str(tmp_path / "read"), ITEMS * SIZE)
        options = pipeline_options(["--runner=FnApiRunner", *mode])
        run_branches(options, "Read", [Read(meter, str(flag))], meter=meter)
    finally:
        progress.install(before)
    assert shown.bars == [("Read on FnApiRunner", ITEMS * SIZE, "B")]
    assert any(0 < n < ITEMS * SIZE for n in shown.shown)  # while it ran
    assert shown.shown[-1] == ITEMS * SIZE  # all of it, at the end
    assert not (tmp_path / "read").exists()  # the meter's folder goes with the run
