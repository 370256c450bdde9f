"""The Beam layer: thin DoFns and CombineFns around the pure functions of the other rooms,
and the composite PTransforms (one module per step) that wire them into each step's graph.
May import every room of transforms; the only part of transforms that imports Beam.

A process that runs these functions freezes Python's garbage collector when it exits:
the interpreter's last collection would otherwise walk everything Beam and the work
left behind, and a local runner waits for its worker processes to end (about 0.45 s of
a 1M-pair prepare on two cores, benchmarks/RESULTS.md). Only the exit is affected:
`atexit` runs the freeze after the work, on any runner.
"""

import atexit
import gc

atexit.register(gc.freeze)
