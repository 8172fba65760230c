"""The one place where etcd's gRPC errors become `caravanserai.errors` types.

    UNAVAILABLE, DEADLINE_EXCEEDED        → Unavailable   (etcd unreachable, no leader, request timed out)
    UNKNOWN "No status received"          → Unavailable   (the connection was lost with the call in flight: the
                                          member stopped or went away before it answered; `fails_over`)
    OUT_OF_RANGE "...has been compacted"  → Expired       (the revision's history is gone: relist)
    OUT_OF_RANGE "...a future revision"   → Invalid       (a revision the store has not reached)
    NOT_FOUND (e.g. unknown lease)        → NotFound
    RESOURCE_EXHAUSTED "...database space exceeded" → ResourceExhausted(NO_SPACE_MESSAGE), not retried: the NOSPACE
                                          alarm stays until an operator compacts, defragments and disarms
    RESOURCE_EXHAUSTED (too many requests) → ResourceExhausted
    anything else                         → the class `caravanserai.errors.error_class` names

Callers write `raise etcd_error(exc) from exc` so the gRPC exception stays attached as the cause.
"""

from __future__ import annotations

import grpc

from caravanserai.errors import ApiError, Expired, Invalid, ResourceExhausted, Unavailable, error_class

# Codes after which another endpoint may answer: the member is down, partitioned or has no leader.
FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

# Codes after which a stream (watch, lease keepalive) is opened again rather than given up.
STREAM_RETRY_CODES = FAILOVER_CODES | {
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNKNOWN,
}

_NO_STATUS = "No status received"
"""gRPC's details of a call whose stream ended without a status: the connection went away mid-call."""


def fails_over(exc: grpc.aio.AioRpcError) -> bool:
    """Whether another endpoint may answer `exc`'s call: the member is down, partitioned or has no leader, or the
    connection was lost with the call in flight (then a write's outcome is unknown, as with UNAVAILABLE)."""
    code = exc.code()
    return code in FAILOVER_CODES or (code == grpc.StatusCode.UNKNOWN and _NO_STATUS in (exc.details() or ""))


NO_SPACE_MESSAGE = "etcd is out of space (NOSPACE alarm); see docs/fleet.md"
"""What a write refused for etcd's space quota says, and what `/readyz` reports while the alarm is raised."""

_NO_SPACE = "database space exceeded"
_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"


def etcd_error(exc: grpc.aio.AioRpcError, *, endpoint: str = "") -> ApiError:
    """The Caravanserai error for a failed etcd call (to be raised `from exc`)."""
    code = exc.code()
    detail = exc.details() or code.name
    where = f" at {endpoint}" if endpoint else ""
    if fails_over(exc):
        return Unavailable(f"etcd{where} unavailable: {detail}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and _NO_SPACE in detail:
        return ResourceExhausted(NO_SPACE_MESSAGE)
    if code == grpc.StatusCode.OUT_OF_RANGE and _COMPACTED in detail:
        return Expired(f"etcd: {detail}")
    if code == grpc.StatusCode.OUT_OF_RANGE and _FUTURE in detail:
        return Invalid(f"etcd: {detail}")
    return error_class(code)(f"etcd: {detail}")


def no_space_alarm(alarms: list[str]) -> bool:
    """Whether etcd's status `errors` (its active alarms) include NOSPACE."""
    return any("NOSPACE" in alarm for alarm in alarms)


__all__ = ["FAILOVER_CODES", "NO_SPACE_MESSAGE", "STREAM_RETRY_CODES", "etcd_error", "no_space_alarm"]
