"""A process that ran nmtpipe's Beam functions freezes the garbage collector at exit."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import atexit, gc, os
# Registered first, so it runs last: after the handlers nmtpipe's import registers.
atexit.register(lambda: os.write(1, f"frozen {gc.get_freeze_count() > 0}".encode()))
import nmtpipe.transforms.beam.encode
print("frozen while working", gc.get_freeze_count() > 0, flush=True)
"""


def test_a_worker_freezes_its_heap_only_when_it_exits():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "frozen while working False\nfrozen True"
