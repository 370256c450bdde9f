"""The Beam layer of `encode`: a thin DoFn around `formats/encode_part.py`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from nmtpipe.transforms.beam.summary_fns import FILE, STATS
from nmtpipe.transforms.formats.encode_part import (
    EncodeSpec,
    EncodeTask,
    encode_part,
    load_encoders,
)
from nmtpipe.transforms.vocab.kinds.base import SideEncoder


class EncodePartFn(beam.DoFn):
    """Encodes one part (`EncodeTask`); emits ("file", entry)... and one ("stats", partial).

    The vocabulary is loaded once per worker, in `setup`."""

    def __init__(self, spec: EncodeSpec) -> None:
        self.spec = spec
        self._encoders: dict[str, SideEncoder] = {}

    def setup(self) -> None:
        self._encoders = load_encoders(self.spec)

    def process(self, task: EncodeTask) -> Iterator[tuple[str, Any]]:
        entries, stats = encode_part(self.spec, self._encoders, task)
        for entry in entries:
            yield FILE, entry
        yield STATS, stats
