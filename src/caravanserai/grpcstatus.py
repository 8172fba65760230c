"""The one mapping between `caravanserai.errors` and gRPC statuses, in both directions.

The server turns an `ApiError` into a status code, a one-line message and a `google.rpc.Status` in the
`grpc-status-details-bin` trailer (with `google.rpc.BadRequest` field violations for `Invalid`, `RetryInfo` for
`ResourceExhausted`). The client turns an `AioRpcError` back into the same `ApiError` subclass.
"""

from __future__ import annotations

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2

from caravanserai.errors import (
    ApiError,
    FieldViolation,
    Invalid,
    ResourceExhausted,
    Unavailable,
    error_class,
)

DETAILS_KEY = "grpc-status-details-bin"


def to_trailer(err: ApiError) -> tuple[tuple[str, bytes], ...]:
    """The trailing metadata carrying the rich status for `err`."""
    status = status_pb2.Status(code=err.code.value[0], message=err.message)
    if isinstance(err, Invalid) and err.violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                for v in err.violations
            ]
        )
        status.details.add().Pack(bad)
    if isinstance(err, ResourceExhausted) and err.retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(err.retry_after * 1e9))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    return ((DETAILS_KEY, status.SerializeToString()),)


def _details(exc: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    for key, value in exc.trailing_metadata() or ():
        if key == DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status()
            status.ParseFromString(value)
            return status
    return None


CERTIFICATE_WANTED = "the server wants a client certificate (it closed the connection): give --tls-cert and --tls-key"
"""What a TLS client without a certificate is told when the server closes the connection during the handshake."""


def from_rpc_error(exc: grpc.aio.AioRpcError, *, target: str = "", without_certificate: bool = False) -> ApiError:
    """The ApiError for a failed call. `target` names the server address in Unavailable messages;
    `without_certificate` (a TLS client that has no certificate and no token) turns gRPC's "Socket closed" (a
    server requiring client certificates drops such a handshake) into `CERTIFICATE_WANTED`."""
    code = exc.code()
    message = exc.details() or code.name
    cls = error_class(code)
    if cls is Unavailable:
        where = f" at {target}" if target else ""
        if without_certificate and "socket closed" in message.lower():
            message = CERTIFICATE_WANTED
        return Unavailable(f"cannot reach the Caravanserai API server{where}: {message}")
    status = _details(exc)
    if cls is Invalid:
        violations: list[FieldViolation] = []
        for any_ in status.details if status else ():
            bad = error_details_pb2.BadRequest()
            if any_.Unpack(bad):
                violations.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
        return Invalid(message, violations)
    if cls is ResourceExhausted:
        retry_after = None
        for any_ in status.details if status else ():
            info = error_details_pb2.RetryInfo()
            if any_.Unpack(info):
                retry_after = info.retry_delay.ToNanoseconds() / 1e9
        return ResourceExhausted(message, retry_after)
    return cls(message)


__all__ = ["CERTIFICATE_WANTED", "DETAILS_KEY", "from_rpc_error", "to_trailer"]
