"""The training objective: fairseq's `label_smoothed_cross_entropy`.

Epsilon is spread over the whole vocabulary and padding is ignored; the loss is summed,
so that the caller can divide by the target tokens of the global batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def label_smoothed_nll(
    logits: torch.Tensor, target: torch.Tensor, epsilon: float, pad: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(smoothed loss, plain NLL), both summed over non-pad target tokens.

    fairseq: loss = (1 - eps - eps/(V-1)) * nll + eps/(V-1) * sum_v(-log p_v).
    """
    lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))
    target = target.reshape(-1)
    keep = target != pad
    lprobs, target = lprobs[keep], target[keep]
    nll = -lprobs.gather(1, target[:, None]).squeeze(1)
    smooth = -lprobs.sum(dim=-1)
    eps_i = epsilon / (logits.size(-1) - 1)
    loss = (1.0 - epsilon - eps_i) * nll + eps_i * smooth
    return loss.sum(), nll.sum()
