"""Retrying storage calls: transient errors are retried, others fail at once."""

from __future__ import annotations

import errno

import pytest

from nmtpipe.transforms.errors import StorageError
from nmtpipe.transforms.storage.retry import RetryPolicy, is_transient, retrying

NO_WAIT = RetryPolicy(attempts=4, first_delay=0.0)


class Flaky:
    """Fails with `error` the first `failures` times it is called."""

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


@pytest.mark.parametrize(
    "error",
    [
        ConnectionResetError(),
        TimeoutError(),
        OSError(errno.EIO, "I/O error"),
        OSError(errno.ETIMEDOUT, "timed out"),
        type("SlowDown", (Exception,), {})(),
        type("ServerDisconnectedError", (Exception,), {})(),
    ],
)
def test_transient_errors_are_retried(error):
    assert is_transient(error)
    op = Flaky(3, error)
    assert retrying(op, "read x", NO_WAIT) == "done" and op.calls == 4


@pytest.mark.parametrize(
    "error",
    [FileNotFoundError("x"), PermissionError("x"), IsADirectoryError("x"), ValueError("bad")],
)
def test_other_errors_fail_at_once(error):
    assert not is_transient(error)
    op = Flaky(1, error)
    with pytest.raises(type(error)):
        retrying(op, "read x", NO_WAIT)
    assert op.calls == 1


def test_persistent_transient_errors_give_up_with_a_clear_message():
    op = Flaky(10, ConnectionResetError("peer reset"))
    with pytest.raises(StorageError) as info:
        retrying(op, "write s3://b/x.bin", NO_WAIT)
    assert op.calls == 4
    assert str(info.value) == (
        "could not write s3://b/x.bin: ConnectionResetError: peer reset (gave up after 4 attempts)"
    )


def test_delays_back_off_exponentially_up_to_a_cap():
    policy = RetryPolicy(attempts=6, first_delay=0.5, factor=3, max_delay=10)
    assert policy.delays() == [0.5, 1.5, 4.5, 10, 10]


def test_tries_of_nmtpipe_and_of_the_store_client_are_bounded_together(s3):
    import fsspec
    import s3fs

    from nmtpipe.transforms.storage.retry import MAX_TRIES, client_tries, policy_for

    s3_fs = s3fs.S3FileSystem()
    assert client_tries(s3_fs) == s3_fs.retries == 5
    assert policy_for(s3_fs).attempts == 2  # 2 x 5 = 10 tries in all, not 6 x 5
    for fs in (s3_fs, fsspec.filesystem("file"), fsspec.filesystem("memory")):
        assert policy_for(fs).attempts * client_tries(fs) <= MAX_TRIES
    assert policy_for(fsspec.filesystem("file")).attempts == 6
