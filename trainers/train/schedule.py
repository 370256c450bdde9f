"""Learning-rate schedules of the anchors (pure arithmetic).

fairseq's `inverse_sqrt` and T2T's `constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size`
have the same shape — linear warm-up, then 1/sqrt(step) — and differ in how the learning
rate is given (`peak_learning_rate`).
"""

from __future__ import annotations

import math

SCHEDULES = ("inverse_sqrt", "rsqrt")


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
