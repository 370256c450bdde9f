"""Peak memory and time of the label-smoothed loss: torch's `cross_entropy` against the
formula written out by hand (fairseq's `label_smoothed_nll_loss`, which nmtpipe used).

Each contender runs in a fresh process: the output projection of `--tokens` decoder
states onto a `--vocab` vocabulary, the loss, and the backward pass, repeated; it reports
the median step time and the peak memory above the inputs (CUDA's allocator peak on a
GPU, the process's peak resident set on a CPU).

    python benchmarks/model/bench_loss.py --tokens 8192 --vocab 32000 --dim 512 [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from nmtpipe.trainers.train.objective import label_smoothed_nll


def by_hand(logits: torch.Tensor, target: torch.Tensor, epsilon: float, pad: int):
    """The formula as fairseq writes it: log-probabilities, a gather and a full sum."""
    lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))
    target = target.reshape(-1)
    keep = target != pad
    lprobs, target = lprobs[keep], target[keep]
    nll = -lprobs.gather(1, target[:, None]).squeeze(1)
    eps_i = epsilon / (logits.size(-1) - 1)
    loss = (1.0 - epsilon - eps_i) * nll + eps_i * -lprobs.sum(dim=-1)
    return loss.sum(), nll.sum()


CONTENDERS = {"cross_entropy": label_smoothed_nll, "by_hand": by_hand}


def peak_bytes(device: str) -> int:
    if device == "cuda":
        return torch.cuda.max_memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(name: str, tokens: int, vocab: int, dim: int, device: str, steps: int) -> dict:
    torch.manual_seed(0)
    hidden = torch.randn(tokens, dim, device=device, requires_grad=True)
    weight = (torch.randn(vocab, dim, device=device) * 0.02).requires_grad_()
    target = torch.randint(4, vocab, (tokens,), device=device)
    target[-tokens // 10 :] = 1  # some padding
    loss_fn = CONTENDERS[name]
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base, times = peak_bytes(device), []
    for _ in range(steps):
        start = time.perf_counter()
        loss, _ = loss_fn(hidden @ weight.T, target, 0.1, 1)
        loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {
        "contender": name,
        "loss": round(loss.item(), 3),
        "step_ms": round(statistics.median(times) * 1000, 1),
        "peak_mib_above_inputs": round((peak_bytes(device) - base) / 2**20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--one", choices=CONTENDERS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        sizes = (args.tokens, args.vocab, args.dim)
        print(json.dumps(measure(args.one, *sizes, args.device, args.steps)))
        return
    for name in CONTENDERS:
        argv = [*sys.argv, "--one", name]
        out = subprocess.run([sys.executable, *argv], check=True, capture_output=True, text=True)
        print(out.stdout.strip())


if __name__ == "__main__":
    main()
