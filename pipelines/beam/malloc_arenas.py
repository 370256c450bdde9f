"""Beam's processes keep glibc's malloc to two arenas.

gRPC and Beam's thread pools move every element between a local runner and its workers
on threads of their own, and glibc gives threads arenas of their own (up to eight per
core): memory freed in one arena stays there, so a process's footprint grows with the
traffic it has carried, not with what it holds.

glibc reads `MALLOC_ARENA_MAX` once, when a process starts, and a worker has started its
threads before it could call `mallopt`: so the limit is set in the environment, for the
worker processes a local runner starts, and by `mallopt` for this one. A value the user
set is kept; elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_ARENA_MAX = -8  # glibc's mallopt parameter
ENV = "MALLOC_ARENA_MAX"
ARENAS = 2


def limit_arenas() -> None:
    """This process and those it starts use `MALLOC_ARENA_MAX` arenas (2 unless set)."""
    arenas = int(os.environ.setdefault(ENV, str(ARENAS)))
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_ARENA_MAX, arenas)
