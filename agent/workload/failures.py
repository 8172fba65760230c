"""Why a service cannot start, when retrying will not help: `ServiceFailure` and its reasons (the project becomes
Failed with the reason and Docker's message)."""

from __future__ import annotations

from caravanserai.errors import CaravanseraiError

REASON_IMAGE_PULL_FAILED = "ImagePullFailed"
REASON_NEVER_PULL = "ErrImageNeverPull"
REASON_CREATE_FAILED = "CreateFailed"
REASON_START_FAILED = "StartFailed"
REASON_HOST_PATH_NOT_ALLOWED = "HostPathNotAllowed"


class ServiceFailure(CaravanseraiError):
    """A service cannot be started for a reason retrying will not fix; the project becomes Failed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


__all__ = [
    "REASON_CREATE_FAILED",
    "REASON_HOST_PATH_NOT_ALLOWED",
    "REASON_IMAGE_PULL_FAILED",
    "REASON_NEVER_PULL",
    "REASON_START_FAILED",
    "ServiceFailure",
]
