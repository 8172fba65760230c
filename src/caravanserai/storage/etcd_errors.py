"""The one place where etcd's gRPC errors become `caravanserai.errors` types.

    UNAVAILABLE, DEADLINE_EXCEEDED        → Unavailable   (etcd unreachable, no leader, request timed out)
    OUT_OF_RANGE "...has been compacted"  → Expired       (the revision's history is gone: relist)
    OUT_OF_RANGE "...a future revision"   → Invalid       (a revision the store has not reached)
    NOT_FOUND (e.g. unknown lease)        → NotFound
    RESOURCE_EXHAUSTED (no space, too many requests) → ResourceExhausted
    anything else                         → the class `caravanserai.errors.error_class` names

Callers write `raise etcd_error(exc) from exc` so the gRPC exception stays attached as the cause.
"""

from __future__ import annotations

import grpc

from caravanserai.errors import ApiError, Expired, Invalid, Unavailable, error_class

# Codes after which another endpoint may answer: the member is down, partitioned or has no leader.
FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

# Codes after which a stream (watch, lease keepalive) is opened again rather than given up.
STREAM_RETRY_CODES = FAILOVER_CODES | {
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNKNOWN,
}

_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"


def etcd_error(exc: grpc.aio.AioRpcError, *, endpoint: str = "") -> ApiError:
    """The Caravanserai error for a failed etcd call (to be raised `from exc`)."""
    code = exc.code()
    detail = exc.details() or code.name
    where = f" at {endpoint}" if endpoint else ""
    if code in FAILOVER_CODES:
        return Unavailable(f"etcd{where} unavailable: {detail}")
    if code == grpc.StatusCode.OUT_OF_RANGE and _COMPACTED in detail:
        return Expired(f"etcd: {detail}")
    if code == grpc.StatusCode.OUT_OF_RANGE and _FUTURE in detail:
        return Invalid(f"etcd: {detail}")
    return error_class(code)(f"etcd: {detail}")


__all__ = ["FAILOVER_CODES", "STREAM_RETRY_CODES", "etcd_error"]
