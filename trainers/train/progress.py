"""What training shows and keeps: JSON lines, TensorBoard scalars, progress (rank 0 only).

JSON lines are the record (one object per log interval, per validation, per warning).
They go to `train_log.jsonl` beside the checkpoints, rewritten with each checkpoint so
that the file matches the state a resumed run starts from (a resumed run appends), never
to stdout, which carries the command's one result. TensorBoard gets every number of
those records under its key. People see the display installed (`transforms/progress.py`;
the command line's, on stderr, draws a bar with the loss on a terminal, a line per
interval otherwise, nothing with --quiet) and, through it, a line per validation,
warning and average.
"""

from __future__ import annotations

import json
from typing import Any

from nmtpipe.transforms import progress as display
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage import fsio


class Progress:
    def __init__(
        self,
        main: bool,
        total: int,
        initial: int,
        tensorboard_dir: str | None,
        log_url: str,
    ) -> None:
        self.main, self._log_url = main, log_url
        self._writer = self._bar = None
        if not main:
            return
        self._lines = fsio.read_bytes(log_url) if initial and fsio.exists(log_url) else b""
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

    def say(self, text: str) -> None:
        """A line for people only (on the first rank), kept in no record."""
        if self.main:
            display.note(text)

    def record(self, record: dict[str, Any]) -> None:
        if not self.main:
            return
        self._lines += json.dumps(record).encode("utf-8") + b"\n"
        said = _said(record)
        if said is not None:
            display.note(said)
        if self._writer is not None and "update" in record:
            prefix = "valid" if any(k.startswith("valid_") for k in record) else "train"
            for key, value in record.items():
                if isinstance(value, (int, float)) and key not in ("update", "epoch"):
                    self._writer.add_scalar(f"{prefix}/{key}", value, record["update"])

    def keep(self) -> None:
        """Write the records so far to `train_log.jsonl` (with each checkpoint)."""
        if self.main:
            fsio.write_bytes(self._log_url, self._lines)

    def close(self, finished: bool = True) -> None:
        """End the display; `finished=False` for a run that stopped (its line ends it)."""
        if self._bar is not None:
            self._bar.close(finished)
        if self._writer is not None:
            self._writer.close()


def _said(record: dict[str, Any]) -> str | None:
    """A record as people read it; None for a log interval's (the bar shows the loss)."""
    if "warning" in record:
        return f"warning: {record['warning']}"
    if "averaged" in record:
        return f"averaged {', '.join(record['averaged'])} into {record['into']}"
    if "valid_loss" not in record:
        return None
    scores = ", ".join(
        f"{key.removeprefix('valid_')} {value:.3f}"
        for key, value in record.items()
        if key.startswith("valid_")
    )
    return f"validation at update {record['update']} (epoch {record['epoch']}): {scores}"
