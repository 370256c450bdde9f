"""The training objective and learning-rate schedules of the anchors.

`label_smoothed_nll` is fairseq's `label_smoothed_cross_entropy` (epsilon spread over
the whole vocabulary, padding ignored), summed, so that the caller can divide by the
target tokens of the global batch. fairseq's `inverse_sqrt` and T2T's
`linear_warmup*rsqrt_decay` have the same shape — linear warm-up, then 1/sqrt(step) —
and differ in how the learning rate is given (`peak_learning_rate`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SCHEDULES = ("inverse_sqrt", "rsqrt")


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


def peak_learning_rate(lr: float, schedule: str, warmup: int, d_model: int) -> float:
    """The learning rate at the end of warm-up.

    `inverse_sqrt` (fairseq): `lr` is that peak. `rsqrt` (T2T's
    `constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size`): `lr` is T2T's
    `learning_rate` constant (2.0 in `transformer_base`), and the peak is
    lr / sqrt(d_model * warmup). Past the peak both decay as 1/sqrt(step).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown --lr-scheduler {schedule!r}; choose from {', '.join(SCHEDULES)}")
    if schedule == "rsqrt":
        return lr / math.sqrt(d_model * max(warmup, 1))
    return lr


def learning_rate(step: int, peak: float, warmup: int) -> float:
    """The learning rate at update `step` (1-based): linear from 0 to `peak` over
    `warmup` updates, then peak * sqrt(warmup / step)."""
    step = max(step, 1)
    if step < warmup:
        return peak * step / warmup
    return peak * math.sqrt(warmup / step) if warmup else peak
