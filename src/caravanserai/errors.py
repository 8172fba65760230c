"""Every exception Caravanserai raises, in one tree.

    CaravanseraiError                 base of everything raised by this package
    ├── ApiError                      an API call was refused; carries the gRPC code and message
    │   ├── NotFound                  NOT_FOUND: no such object
    │   ├── AlreadyExists             ALREADY_EXISTS: create of a name that is taken
    │   ├── Conflict                  ABORTED: stale resource_version (read again, reconcile again)
    │   ├── Invalid                   INVALID_ARGUMENT: bad input; `.violations` lists (field path, message)
    │   ├── FailedPrecondition        FAILED_PRECONDITION: illegal phase transition, node still has projects …
    │   ├── Expired                   OUT_OF_RANGE: the resource_version was compacted; relist
    │   ├── Unauthenticated           UNAUTHENTICATED
    │   ├── Forbidden                 PERMISSION_DENIED
    │   ├── ResourceExhausted         RESOURCE_EXHAUSTED: slow down; `.retry_after` seconds when known
    │   ├── Unavailable               UNAVAILABLE / DEADLINE_EXCEEDED: the server cannot be reached now
    │   └── InternalError             anything else the server answered
    └── TerminalError                 a reconciler gives up on a key: logged, not retried

Transport exceptions (grpc, etcd, aiodocker) are wrapped with `raise … from exc` at one boundary each
(`caravanserai.client` for gRPC) and never leak upward. The CLI prints `str(error)`: one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc


class CaravanseraiError(Exception):
    """Base class of every error raised by Caravanserai."""


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One rejected field: its path in camelCase manifest notation (e.g. `spec.services[1].name`) and why."""

    field: str
    description: str

    def __str__(self) -> str:
        return f"{self.field}: {self.description}"


class ApiError(CaravanseraiError):
    """The API refused a call. `code` is the gRPC status code, `message` the server's one-line explanation."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(ApiError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(ApiError):
    code = grpc.StatusCode.ALREADY_EXISTS


CONFLICT_WORDING = "the object has been modified; please apply your changes to the latest version and try again"


class Conflict(ApiError):
    """The object changed since it was read (stale resource_version). Read it again and retry the decision.

    Every Conflict Caravanserai raises is worded by `Conflict.modified`: "<what>: the object has been modified
    (<details>); please apply your changes to the latest version and try again".
    """

    code = grpc.StatusCode.ABORTED
    expected: str = ""  # the version the writer expected, when known
    current: str = ""  # the version found instead, when known

    @classmethod
    def modified(cls, what: str, *, expected: str | int = "", current: str | int = "") -> Conflict:
        """The Conflict for `what` (e.g. "Project web") changed since it was read; versions shown when known."""
        details = f" (expected version {expected}, current {current})" if expected and current else ""
        head, tail = CONFLICT_WORDING.split(";", 1)
        error = cls(f"{what}: {head}{details};{tail}")
        error.expected, error.current = str(expected or ""), str(current or "")
        return error


class Invalid(ApiError):
    """Input was refused. `violations` names each offending field with its path."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, message: str, violations: Sequence[FieldViolation] = ()) -> None:
        super().__init__(message)
        self.violations: tuple[FieldViolation, ...] = tuple(violations)

    @classmethod
    def of(cls, violations: Sequence[FieldViolation], *, what: str = "object") -> Invalid:
        """Build the error for a list of violations with a one-line summary naming every field."""
        summary = "; ".join(str(v) for v in violations)
        return cls(f"invalid {what}: {summary}", violations)


class FailedPrecondition(ApiError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Expired(ApiError):
    """The requested resource_version is older than the oldest the server keeps: list again, then watch."""

    code = grpc.StatusCode.OUT_OF_RANGE


class Unauthenticated(ApiError):
    code = grpc.StatusCode.UNAUTHENTICATED


class Forbidden(ApiError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(ApiError):
    """The server is overloaded or the caller exceeded its share; retry after `retry_after` seconds."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(ApiError):
    code = grpc.StatusCode.UNAVAILABLE


class InternalError(ApiError):
    code = grpc.StatusCode.INTERNAL


class TerminalError(CaravanseraiError):
    """Raised by a reconciler to give up on a key: it is logged and forgotten, not retried."""


_BY_CODE: dict[grpc.StatusCode, type[ApiError]] = {
    cls.code: cls
    for cls in (
        NotFound,
        AlreadyExists,
        Conflict,
        Invalid,
        FailedPrecondition,
        Expired,
        Unauthenticated,
        Forbidden,
        ResourceExhausted,
        Unavailable,
        InternalError,
    )
}
_BY_CODE[grpc.StatusCode.DEADLINE_EXCEEDED] = Unavailable
# A call cut off by a stopping server (or a dropped connection) is an outage, not a bug.
_BY_CODE[grpc.StatusCode.CANCELLED] = Unavailable


def error_class(code: grpc.StatusCode) -> type[ApiError]:
    """The ApiError subclass for a gRPC status code (InternalError for codes without their own class)."""
    return _BY_CODE.get(code, InternalError)


__all__ = [
    "AlreadyExists",
    "ApiError",
    "CONFLICT_WORDING",
    "CaravanseraiError",
    "Conflict",
    "Expired",
    "FailedPrecondition",
    "FieldViolation",
    "Forbidden",
    "InternalError",
    "Invalid",
    "NotFound",
    "ResourceExhausted",
    "TerminalError",
    "Unauthenticated",
    "Unavailable",
    "error_class",
]
