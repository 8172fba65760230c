"""Why a service cannot start: `ServiceFailure` when retrying will not help (the project becomes Failed with the
reason and Docker's message), `SetupFailure` when a later attempt may succeed: Docker refused to make something the
project needs, or a start-first replacement did not become healthy (the old container keeps serving). Either way
the project says so in its status (the service's message) and a Warning Event, and is retried with backoff."""

from __future__ import annotations

from caravanserai.errors import CaravanseraiError

REASON_IMAGE_PULL_FAILED = "ImagePullFailed"
REASON_NEVER_PULL = "ErrImageNeverPull"
REASON_CREATE_FAILED = "CreateFailed"
REASON_START_FAILED = "StartFailed"
REASON_HOST_PATH_NOT_ALLOWED = "HostPathNotAllowed"
REASON_NETWORK_FAILED = "NetworkFailed"
REASON_VOLUME_FAILED = "VolumeFailed"
REASON_START_FIRST_FAILED = "StartFirstFailed"

NETWORK = "network"
VOLUME = "volume"
CONTAINER = "container"
REPLACEMENT = "a healthy replacement"
_REASONS = {
    NETWORK: REASON_NETWORK_FAILED,
    VOLUME: REASON_VOLUME_FAILED,
    CONTAINER: REASON_CREATE_FAILED,
    REPLACEMENT: REASON_START_FIRST_FAILED,
}


class ServiceFailure(CaravanseraiError):
    """A service cannot be started for a reason retrying will not fix; the project becomes Failed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class SetupFailure(CaravanseraiError):
    """Docker refused to make the project's network, one of its volumes, or a service's container for a reason
    that may pass (its address pools exhausted, a name taken by a foreign object, a daemon-side error), or a
    service's start-first replacement did not become healthy (its old container still runs). `what` is NETWORK,
    VOLUME, CONTAINER or REPLACEMENT; `message` is Docker's (naming the object) or says why the replacement failed;
    `waits` is what the services wait for, e.g. `network: create network cara_web_n1: …`."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(f"waiting for {what}: {message}")
        self.what = what
        self.message = message

    @property
    def reason(self) -> str:
        """The Event and condition reason: NetworkFailed, VolumeFailed, CreateFailed or StartFirstFailed."""
        return _REASONS[self.what]

    @property
    def waits(self) -> str:
        return f"{self.what}: {self.message}"


__all__ = [
    "CONTAINER",
    "NETWORK",
    "REASON_CREATE_FAILED",
    "REASON_HOST_PATH_NOT_ALLOWED",
    "REASON_IMAGE_PULL_FAILED",
    "REASON_NETWORK_FAILED",
    "REASON_NEVER_PULL",
    "REASON_START_FAILED",
    "REASON_START_FIRST_FAILED",
    "REPLACEMENT",
    "REASON_VOLUME_FAILED",
    "SetupFailure",
    "ServiceFailure",
    "VOLUME",
]
