"""fairseq's label-smoothed cross entropy, collation, the learning-rate schedules."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nmtpipe.trainers.data.collate import collate
from nmtpipe.trainers.train.objective import label_smoothed_nll
from nmtpipe.trainers.train.schedule import learning_rate, peak_learning_rate


def test_label_smoothing_matches_fairseqs_formula():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7)
    target = torch.tensor([[4, 5, 1], [6, 1, 1]])  # 1 is padding
    loss, nll = label_smoothed_nll(logits, target, epsilon=0.1, pad=1)
    lprobs = torch.log_softmax(logits, -1)
    expected_loss = expected_nll = 0.0
    for b, t in [(0, 0), (0, 1), (1, 0)]:
        y = int(target[b, t])
        expected_nll += -lprobs[b, t, y]
        # fairseq: (1 - eps - eps_i) * nll + eps_i * smooth, eps_i = eps / (V - 1)
        eps_i = 0.1 / 6
        expected_loss += (1 - 0.1 - eps_i) * -lprobs[b, t, y] + eps_i * -lprobs[b, t].sum()
    torch.testing.assert_close(nll, expected_nll)
    torch.testing.assert_close(loss, expected_loss)
    plain, _ = label_smoothed_nll(logits, target, epsilon=0.0, pad=1)
    torch.testing.assert_close(plain, nll)


def _fairseq_loss(logits: torch.Tensor, target: torch.Tensor, eps: float, pad: int):
    """fairseq's label_smoothed_nll_loss, written out with its full-vocabulary sums."""
    lprobs = torch.log_softmax(logits.double(), -1).view(-1, logits.size(-1))
    keep = target.reshape(-1) != pad
    lprobs, gold = lprobs[keep], target.reshape(-1)[keep]
    nll = -lprobs.gather(1, gold[:, None]).squeeze(1)
    eps_i = eps / (logits.size(-1) - 1)
    return ((1 - eps - eps_i) * nll + eps_i * -lprobs.sum(-1)).sum()


def test_label_smoothing_equals_fairseqs_loss_and_gradient_at_a_real_vocabulary_size():
    torch.manual_seed(1)
    logits = torch.randn(4, 9, 32000, requires_grad=True)
    target = torch.randint(4, 32000, (4, 9))
    target[:, 6:] = 1
    loss, _ = label_smoothed_nll(logits, target, epsilon=0.1, pad=1)
    (grad,) = torch.autograd.grad(loss, logits)
    reference = _fairseq_loss(logits, target, 0.1, pad=1)
    (expected,) = torch.autograd.grad(reference, logits)
    torch.testing.assert_close(loss.double(), reference, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-6)  # float32 rounding
    assert not grad[:, 6:].any()  # padding takes no part


def test_collate_shifts_the_target_and_pads_to_eight():
    pairs = [(np.array([5, 6, 2]), np.array([7, 8, 9, 2])), (np.array([4, 2]), np.array([3, 2]))]
    batch = collate(pairs, pad=1, eos=2)
    assert batch.src.shape == (2, 8) and batch.tgt.shape == (2, 8)
    assert batch.src[0, :4].tolist() == [5, 6, 2, 1] and batch.src.dtype == torch.int64
    assert batch.tgt[0, :5].tolist() == [7, 8, 9, 2, 1]
    assert batch.prev_tgt[0, :5].tolist() == [2, 7, 8, 9, 1]
    assert batch.prev_tgt[1, :3].tolist() == [2, 3, 1] and batch.target_tokens == 6


def test_schedules():
    assert learning_rate(1, 5e-4, 4000) == pytest.approx(5e-4 / 4000)
    assert learning_rate(4000, 5e-4, 4000) == pytest.approx(5e-4)
    assert learning_rate(16000, 5e-4, 4000) == pytest.approx(2.5e-4)
    # T2T transformer_base: 2.0 * min(1, step/warmup) * rsqrt(max(step, warmup)) * rsqrt(512)
    peak = peak_learning_rate(2.0, "rsqrt", 8000, 512)
    for step in (100, 8000, 50000):
        t2t = 2.0 * min(1.0, step / 8000) / math.sqrt(max(step, 8000)) / math.sqrt(512)
        assert learning_rate(step, peak, 8000) == pytest.approx(t2t)
    assert peak_learning_rate(5e-4, "inverse_sqrt", 4000, 512) == 5e-4
    with pytest.raises(ValueError, match="unknown --lr-scheduler 'cosine'"):
        peak_learning_rate(1.0, "cosine", 1, 1)
