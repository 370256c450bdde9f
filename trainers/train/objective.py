"""The training objective: fairseq's `label_smoothed_cross_entropy`.

Epsilon is spread over the whole vocabulary and padding is ignored; the loss is summed,
so that the caller can divide by the target tokens of the global batch. torch's own
`cross_entropy` computes it without full-vocabulary temporaries beyond the one
log-softmax it keeps for the backward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def label_smoothed_nll(
    logits: torch.Tensor, target: torch.Tensor, epsilon: float, pad: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(smoothed loss, plain NLL), both summed over non-pad target tokens.

    fairseq: loss = (1 - eps - eps/(V-1)) * nll + eps/(V-1) * sum_v(-log p_v), which is
    torch's `(1 - a) * nll + a/V * sum_v(-log p_v)` for a = eps * V / (V - 1).
    """
    vocab = logits.size(-1)
    flat, target = logits.reshape(-1, vocab), target.reshape(-1)
    smoothing = epsilon * vocab / (vocab - 1)
    loss = F.cross_entropy(
        flat, target, ignore_index=pad, reduction="sum", label_smoothing=smoothing
    )
    with torch.no_grad():  # reported only: no graph, its temporary freed at once
        nll = F.cross_entropy(flat, target, ignore_index=pad, reduction="sum")
    return loss, nll
