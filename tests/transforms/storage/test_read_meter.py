"""The channel a Beam job's readers tell the driver how far they have read through."""

from __future__ import annotations

import pickle

from nmtpipe.transforms.storage import read_meter
from nmtpipe.transforms.storage.read_meter import Meter, ReadCount


def test_readers_tell_their_counts_and_the_driver_sums_the_latest(tmp_path, monkeypatch):
    monkeypatch.setattr(read_meter, "PUBLISH_SECONDS", 0.0)
    meter = Meter(str(tmp_path / "read"), 1000)
    assert meter.read_so_far() == 0  # (no folder yet)
    first = ReadCount(meter)
    second = pickle.loads(pickle.dumps(first))  # a worker's copy counts on its own
    first.add(100)
    first.add(50)
    second.add(7)
    assert meter.read_so_far() == 157
    assert len(list((tmp_path / "read").iterdir())) == 2  # one file a reader
    meter.remove()
    assert not (tmp_path / "read").exists()


def test_a_count_is_told_at_most_once_a_period_and_at_the_bundle_end(tmp_path):
    meter = Meter(str(tmp_path / "read"), 1000)
    count = ReadCount(meter)
    count.add(10)  # (within the first period: kept)
    assert meter.read_so_far() == 0
    count.publish()
    assert meter.read_so_far() == 10


def test_without_a_meter_nothing_is_told(tmp_path):
    count = ReadCount(None)
    count.add(10)
    count.publish()
    assert list(tmp_path.iterdir()) == []


def test_a_failed_telling_never_fails_the_reader(tmp_path):
    (tmp_path / "file").write_text("")
    count = ReadCount(Meter(str(tmp_path / "file" / "read"), 10))  # under a file
    count.add(3)
    count.publish()
