"""Pairs of id arrays → padded tensors for teacher forcing, as fairseq's collater makes them.

Every stored sentence ends in EOS. The decoder's input is the target shifted right with
EOS in front (fairseq's `prev_output_tokens`); the target keeps its EOS, so the model
learns to stop. Widths are padded to a multiple of `pad_to` (8 on GPUs: tensor-core
shapes, and the widths the batcher budgeted for); padding is on the right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nmtpipe.trainers.data.batching import padded


@dataclass
class Batch:
    src: torch.Tensor  # [batch, src_len], int64
    prev_tgt: torch.Tensor  # [batch, tgt_len]
    tgt: torch.Tensor  # [batch, tgt_len]
    target_tokens: int  # non-pad target tokens (the loss is averaged over these)

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.src.to(device, non_blocking=True),
            self.prev_tgt.to(device, non_blocking=True),
            self.tgt.to(device, non_blocking=True),
            self.target_tokens,
        )


def _pad(rows: Sequence[np.ndarray], pad: int, width: int, shift_eos: int | None) -> np.ndarray:
    out = np.full((len(rows), width), pad, dtype=np.int64)
    for i, row in enumerate(rows):
        if shift_eos is None:
            out[i, : row.size] = row
        else:
            out[i, 0] = shift_eos
            out[i, 1 : row.size] = row[:-1]
    return out


def collate(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]], pad: int, eos: int, pad_to: int = 8
) -> Batch:
    """A training batch from (src, tgt) id arrays, each ending in EOS."""
    src_rows = [s for s, _ in pairs]
    tgt_rows = [t for _, t in pairs]
    src_width = int(padded(np.array(max(r.size for r in src_rows)), pad_to))
    tgt_width = int(padded(np.array(max(r.size for r in tgt_rows)), pad_to))
    return Batch(
        src=torch.from_numpy(_pad(src_rows, pad, src_width, None)),
        prev_tgt=torch.from_numpy(_pad(tgt_rows, pad, tgt_width, eos)),
        tgt=torch.from_numpy(_pad(tgt_rows, pad, tgt_width, None)),
        target_tokens=sum(r.size for r in tgt_rows),
    )
