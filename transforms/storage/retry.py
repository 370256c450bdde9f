"""Retrying storage operations that fail for a moment, and only those.

Object stores drop connections, time out and throttle; a step that writes thousands of
files meets such errors routinely. An operation is retried when its error is transient
(connection lost, timeout, I/O error, throttling) and it is safe to repeat — every
operation passed here is idempotent: a whole-file read, a whole-file atomic write, a
metadata call. Anything else (missing file, permission denied, bad request) fails at
once. Retries back off exponentially; the delays are fixed, not random, so runs are
reproducible.
"""

from __future__ import annotations

import dataclasses
import errno
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from nmtpipe.transforms.errors import StorageError

T = TypeVar("T")

_TRANSIENT_ERRNOS = frozenset(
    {errno.EIO, errno.EAGAIN, errno.EBUSY, errno.ETIMEDOUT, errno.ECONNRESET, errno.ECONNABORTED}
    | {getattr(errno, "EREMOTEIO", errno.EIO)}  # s3fs's "InternalError" (HTTP 500)
)
_TRANSIENT_NAMES = ("Throttl", "SlowDown", "RequestTimeout", "ServiceUnavailable", "Timeout")


def is_transient(error: BaseException) -> bool:
    """Whether `error` may go away by itself (as opposed to a missing file or a denial)."""
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return False
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
        return True
    # aiohttp/botocore errors that s3fs, gcsfs and adlfs let through untranslated.
    name = type(error).__name__
    return any(part in name for part in _TRANSIENT_NAMES) or name in (
        "ClientConnectionError",
        "ServerDisconnectedError",
        "EndpointConnectionError",
        "ReadTimeoutError",
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry: `attempts` tries in all, waiting
    `first_delay * factor**k` seconds (at most `max_delay`) after the k-th failure."""

    attempts: int = 6
    first_delay: float = 0.2
    factor: float = 2.0
    max_delay: float = 10.0

    def delays(self) -> list[float]:
        return [
            min(self.first_delay * self.factor**k, self.max_delay) for k in range(self.attempts - 1)
        ]


DEFAULT_POLICY = RetryPolicy()
# At most this many tries of one storage operation in all, counting the tries the store's
# client makes by itself: s3fs tries each call 5 times (`S3FileSystem.retries`), gcsfs
# 6, adlfs (the Azure SDK) 4, so nmtpipe's own retries must not multiply with theirs.
MAX_TRIES = 12
CLIENT_TRIES = {"s3": 5, "s3a": 5, "gs": 6, "gcs": 6, "az": 4, "abfs": 4, "abfss": 4}


def client_tries(fs: Any) -> int:
    """How often the client of filesystem `fs` tries each call by itself (1: once)."""
    own = getattr(fs, "retries", None)
    if isinstance(own, int) and own > 0:
        return own
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return max(CLIENT_TRIES.get(p, 1) for p in protocols)


def policy_for(fs: Any) -> RetryPolicy:
    """The retry policy of operations on `fs`: as many attempts as keep the tries of
    nmtpipe and of the store's client together within MAX_TRIES (6 on a local disk or a
    store that does not retry; 2 on S3, whose client tries 5 times: 10 tries in all)."""
    attempts = min(DEFAULT_POLICY.attempts, max(1, MAX_TRIES // client_tries(fs)))
    return dataclasses.replace(DEFAULT_POLICY, attempts=attempts)


def failure(what: str, error: BaseException) -> str:
    """How a storage operation's failure reads: `could not read s3://b/x: Error: text`."""
    return f"could not {what}: {type(error).__name__}: {error}"


def retrying(operation: Callable[[], T], what: str, policy: RetryPolicy | None = None) -> T:
    """Run `operation`, retrying transient errors; `what` names it in the final error
    ("write s3://bucket/x.bin"). Non-transient errors are raised unchanged."""
    policy = policy or DEFAULT_POLICY
    delays = iter(policy.delays())
    while True:
        try:
            return operation()
        except Exception as error:
            if not is_transient(error):
                raise
            delay = next(delays, None)
            if delay is None:
                raise StorageError(
                    f"{failure(what, error)} (gave up after {policy.attempts} attempts)"
                ) from error
            time.sleep(delay)
