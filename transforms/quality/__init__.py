"""Pair quality: scores that tell a translation from a non-translation (misaligned,
partial and meaningless pairs, near-duplicates), each scorer a registered kind
(`registry.py`), with thresholds. May import text and storage; no Beam.

Its loops are compiled by numba, which colours its messages with colorama where that is
installed: the first call of a compiled function then has colorama write a terminal
reset when the process exits, a stray line after a command's last one. Set before
numba is imported, this keeps numba from loading colorama (a user's own setting stays).
"""

import os

os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
