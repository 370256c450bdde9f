"""What training shows: JSON lines on stdout, TensorBoard scalars, a tqdm bar (rank 0 only).

JSON lines are the record (one object per log interval and per validation, then the
summary); TensorBoard gets every number of those records under its key; the progress bar
is drawn only on a terminal.
"""

from __future__ import annotations

import json
import sys
from typing import Any

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
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=initial, unit="update", dynamic_ncols=True)

    def advance(self, loss: float) -> None:
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    def record(self, record: dict[str, Any]) -> None:
        if not self.main:
            return
        line = json.dumps(record)
        if self._bar is not None:
            self._bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)
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
