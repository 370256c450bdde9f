"""The process group of a torchrun job (or one process), and opening data on every rank.

Training and decoding run once per process; torchrun describes the job in the
environment (WORLD_SIZE, RANK, LOCAL_RANK). On CUDA each process takes its local GPU
and NCCL, on CPU gloo.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

import torch
import torch.distributed as dist

from nmtpipe.transforms.errors import RankLost
from nmtpipe.transforms.formats.encoded_dataset import EncodedDataset, open_dataset


class Ranks:
    """The process group as torchrun describes it in the environment (or one process)."""

    def __init__(self) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast on CUDA (training and decoding); nothing on the CPU."""
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def sum(self, *values: float) -> list[float]:
        """Element-wise sums over ranks (one all-reduce)."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.world > 1:
            dist.all_reduce(tensor)
        return tensor.tolist()

    def gather(self, obj: Any) -> list[Any]:
        if self.world == 1:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def gather_to_main(self, obj: Any) -> list[Any]:
        """Every rank's `obj` on the first rank (in rank order); [] elsewhere."""
        if self.world == 1:
            return [obj]
        out: list[Any] | None = [None] * self.world if self.main else None
        dist.gather_object(obj, out, dst=0)
        return out or []

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


# Where gloo raised (`[/.../gloo/transport/tcp/pair.cc:537] `) and its boilerplate advice.
_SOURCE = re.compile(r"\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*")
_ADVICE = " This is typically caused by"
# NCCL's words for another rank gone (PyTorch's ProcessGroupNCCL and NCCLUtils): its
# connection lost (ncclRemoteError), the collective it never joined timed out (the
# watchdog), or the communicator aborted after either.
_NCCL_LOST = (
    "remote process exited or there was a network error",
    "Watchdog caught collective operation timeout",
    "NCCL communicator was aborted",
)
# Where NCCL failed (`NCCL error in: /pytorch/.../NCCLUtils.cpp:77, `), which process group
# and rank said it (`[PG ID 0 PG GUID 0(default_pg) Rank 1] `), and NCCL's own detail.
_NCCL_SOURCE = re.compile(r"NCCL error in: \S+:\d+, ")
_NCCL_PREFIX = re.compile(r"\[(?:PG [^\]]*)?Rank \d+\]\s*")
_NCCL_LAST = "\nLast error:\n"


def peer_failure(exc: BaseException) -> str | None:
    """What gloo or NCCL said when `exc` is the network between the ranks failing (another
    rank gone: its connection closed, reset or timed out; or the ranks never connecting),
    in one line without their source locations and advice; None for any other error."""
    text = str(exc).strip()
    if isinstance(exc, dist.DistBackendError) and any(words in text for words in _NCCL_LOST):
        return _nccl_line(text)
    if not isinstance(exc, RuntimeError) or not (
        "/gloo/transport/" in text or isinstance(exc, dist.DistNetworkError)
    ):
        return None
    lines = _SOURCE.sub("", text.split(_ADVICE)[0]).strip().splitlines()
    return lines[0].rstrip(".") if lines else type(exc).__name__


def _nccl_line(text: str) -> str:
    """NCCL's first line, then its last error (which peer), if it has one: the paragraph
    between them only says what ncclRemoteError means."""
    head, _, last = text.partition(_NCCL_LAST)
    first = _NCCL_PREFIX.sub("", _NCCL_SOURCE.sub("NCCL error: ", head)).splitlines()[0]
    line = " ".join(first.split()).rstrip(".")
    detail = last.strip().splitlines()[:1]
    return "; ".join([line, *detail])


def open_on_ranks(ranks: Ranks, url: str, fmt: str | None, cache_dir: str | None) -> EncodedDataset:
    """The dataset, checked in full (sha256) and cached by the first rank of each
    machine while the others wait, then opened by them with size checks only. A
    failure on a first rank stops every rank (none is left waiting)."""
    data, error = None, None
    if ranks.local_rank == 0:
        try:
            data = open_dataset(url, fmt, cache_dir)
        except Exception as e:
            error = e
    (failures,) = ranks.sum(error is not None)  # also the barrier
    if error is not None:
        raise error
    if failures:
        raise RankLost(f"another rank could not open {url} (see its error)")
    return data if data is not None else open_dataset(url, fmt, cache_dir, "size")
