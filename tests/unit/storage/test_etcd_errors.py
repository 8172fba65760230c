"""etcd's gRPC errors as ours: a call whose connection went away mid-call is Unavailable (another member may
answer; a write's outcome is unknown), like an unreachable member, never an internal error."""

from __future__ import annotations

import grpc
import pytest

from caravanserai.errors import ApiError, Expired, InternalError, Unavailable
from caravanserai.storage.etcd_errors import etcd_error, fails_over


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


@pytest.mark.parametrize(
    ("code", "details", "fails", "expected"),
    [
        (grpc.StatusCode.UNAVAILABLE, "connection refused", True, Unavailable),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True, Unavailable),
        (grpc.StatusCode.UNKNOWN, "No status received", True, Unavailable),
        (grpc.StatusCode.UNKNOWN, "etcdserver: something else", False, ApiError),
        (grpc.StatusCode.INTERNAL, "No status received", False, InternalError),
        (grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted", False, Expired),
    ],
)
def test_lost_connections_fail_over_and_are_unavailable(
    code: grpc.StatusCode, details: str, fails: bool, expected: type[ApiError]
) -> None:
    exc = rpc_error(code, details)
    assert fails_over(exc) is fails
    err = etcd_error(exc, endpoint="http://127.0.0.1:2379")
    assert isinstance(err, expected) and details in err.message
