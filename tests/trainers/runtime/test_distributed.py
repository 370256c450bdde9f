"""A lost rank under NCCL, as PyTorch raises it on the ranks that remain, in one line
(gloo's, from real runs, are in test_two_hosts.py)."""

from __future__ import annotations

import pytest
from torch.distributed import DistBackendError

from nmtpipe.trainers.runtime.distributed import peer_failure

# The texts PyTorch's ProcessGroupNCCL builds (torch/csrc/distributed/c10d/): its
# watchdog's timeout (WorkNCCL::checkTimeout, raised by the collective's wait on the
# main thread), NCCL's error code through C10D_NCCL_CHECK (NCCLUtils.hpp:
# ncclGetErrorWithVersion, then getNcclErrorDetailStr with ncclGetLastError's text) and
# through the watchdog's check of the communicator, and a communicator used once aborted
# (NCCLComm::getNcclComm). The last error is what NCCL 2.29's socket transport says
# (`socketProgress` in libnccl) when its peer's process is gone.
_TIMEOUT = (
    "[PG ID 0 PG GUID 0(default_pg) Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=3, NumelOut=3, Timeout(ms)=600000) ran for "
    "600016 milliseconds before timing out."
)
_REMOTE_DETAIL = (
    ", remote process exited or there was a network error, NCCL version 2.29.7\n"
    "ncclRemoteError: A call failed possibly due to a network error or a remote process "
    "exiting prematurely.\nLast error:\n"
    "socketProgress: Connection closed by remote peer 10.233.0.2<35417>"
)
_CHECK = "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77" + _REMOTE_DETAIL
_ASYNC = "NCCL error: " + _REMOTE_DETAIL.removeprefix(", ")
_ABORTED = "NCCL communicator was aborted on rank 0.  Original reason for failure was: " + _TIMEOUT
_MISUSED = (
    "NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, invalid "
    "usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.29.7\nncclInvalidUsage: This "
    "usually reflects invalid usage of NCCL library.\nLast error: Unknown NCCL Error\n"
)
_WATCHDOG_SAID = (
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
    "NumelIn=3, NumelOut=3, Timeout(ms)=600000) ran for 600016 milliseconds before timing out"
)
_REMOTE_SAID = (
    "NCCL error: remote process exited or there was a network error, NCCL version 2.29.7; "
    "socketProgress: Connection closed by remote peer 10.233.0.2<35417>"
)


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (DistBackendError(_TIMEOUT), _WATCHDOG_SAID),
        (DistBackendError(_CHECK), _REMOTE_SAID),
        (DistBackendError(_ASYNC), _REMOTE_SAID),
        (DistBackendError("NCCL communicator was aborted on rank 0. "),
         "NCCL communicator was aborted on rank 0"),
        (DistBackendError(_ABORTED),
         "NCCL communicator was aborted on rank 0. Original reason for failure was: "
         + _WATCHDOG_SAID),
        (DistBackendError(_MISUSED), None),  # this rank's own mistake
        (RuntimeError(_TIMEOUT), None),  # not raised by the process group
    ],
)  # fmt: skip
def test_a_rank_lost_under_nccl_is_a_peer_failure_in_one_line(error, said):
    assert peer_failure(error) == said
