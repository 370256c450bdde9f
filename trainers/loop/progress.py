"""What training shows: JSON lines on stdout, TensorBoard scalars, progress (rank 0 only).

JSON lines are the record (one object per log interval and per validation, then the
summary); TensorBoard gets every number of those records under its key; progress is
`transforms/progress.py`'s display (a bar on a terminal, a line per interval otherwise,
nothing with --quiet), on stderr, so stdout stays JSON.
"""

from __future__ import annotations

import json
from typing import Any

from nmtpipe.transforms import progress as display
from nmtpipe.transforms.errors import ConfigError


class Progress:
    def __init__(self, main: bool, total: int, initial: int, tensorboard_dir: str | None) -> None:
        self.main = main
        self._writer = self._bar = None
        if not main:
            return
        if tensorboard_dir:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:
                raise ConfigError(
                    "--tensorboard-logdir needs the tensorboard package: "
                    "pip install 'nmtpipe[tensorboard]'"
                ) from e
            self._writer = SummaryWriter(tensorboard_dir)
        self._bar = display.Progress("train", total, "update", initial)

    def advance(self, loss: float) -> None:
        if self._bar is not None:
            self._bar.update(1, loss=f"{loss:.3f}")

    def record(self, record: dict[str, Any]) -> None:
        if not self.main:
            return
        print(json.dumps(record), flush=True)
        if self._writer is not None and "update" in record:
            prefix = "valid" if any(k.startswith("valid_") for k in record) else "train"
            for key, value in record.items():
                if isinstance(value, (int, float)) and key not in ("update", "epoch"):
                    self._writer.add_scalar(f"{prefix}/{key}", value, record["update"])

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._writer is not None:
            self._writer.close()
