"""Scratch folders: gone however their process ends, by the next one when it was killed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from nmtpipe.transforms.storage.scratch import scratch_folder


def test_a_killed_process_s_folder_goes_with_the_next_one_a_live_one_s_stays(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    prefix = f"nmtpipe-t2t-{socket.gethostname()}-"
    stale = tmp_path / f"{prefix}{ended.stdout.strip()}-abc"
    live = tmp_path / f"{prefix}{os.getppid()}-def"  # this test's parent: running
    other = tmp_path / f"nmtpipe-t2t-another-host-{ended.stdout.strip()}-ghi"
    for folder in (stale, live, other):
        folder.mkdir()
        (folder / "0.tokens").write_bytes(b"x")
    scratch = scratch_folder("t2t", str(tmp_path))
    made = scratch.name
    assert os.path.basename(made).startswith(f"{prefix}{os.getpid()}-")
    assert not stale.exists() and live.exists() and other.exists()
    scratch.cleanup()
    assert not os.path.exists(made)


def test_by_default_it_is_under_tmpdir(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    with scratch_folder("t2t") as made:
        assert os.path.dirname(made) == str(tmp_path)
