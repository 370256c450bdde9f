"""Beam's processes freeze Python's garbage collector when they exit.

The interpreter's last collection walks everything Beam and the work left behind, and a
local runner waits for its worker processes to end: freezing it first saved about 0.45 s
of a 1M-pair prepare on two cores (benchmarks/RESULTS.md, "The workers' exit too").
Only the exit is affected: `atexit` runs the freeze after the work.

It is applied where Beam runs, never as a side effect of importing nmtpipe's Beam
functions: the `nmtpipe` command for the commands that run Beam (`main._start_beam`),
and every Beam worker, on any runner, by importing this module at its start as a Beam
plugin (`--beam_plugins`, which `options.pipeline_options` adds).
"""

from __future__ import annotations

import atexit
import gc


def freeze_at_exit() -> None:
    """Freeze the garbage collector when this process exits; asking again changes nothing."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


# A Beam worker imports its plugins at its start, for what importing them does.
freeze_at_exit()
