"""How the agent tells about image pulls: Events when a pull starts and ends (with the image's size and the time
it took), a Warning when a pull fails while the old container keeps running, and the progress in the service's
status message while the pull runs.

Guarantees:

* **Progress writes are rare and harmless**: at most one status write per `interval` seconds, compare-and-swap on
  the latest version this reporter saw; a write that meets a change is dropped (the reconcile's own write follows).
  `latest` is the project as last written, for the reconcile to build on.
* No Event or message carries registry credentials.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.agent.docker.records import PullProgress
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import NORMAL, WARNING, EventRecorder
from caravanserai.errors import Conflict, FailedPrecondition, Forbidden, NotFound
from caravanserai.text.quantity import format_bytes

REASON_PULLING = "Pulling"
REASON_PULLED = "Pulled"
REASON_PULL_BACK_OFF = "PullBackOff"
PROGRESS_INTERVAL = 1.0  # seconds between progress writes


def progress_text(image: str, progress: PullProgress) -> str:
    """E.g. `pulling image app:1: 3.1Mi of 10.2Mi (2/5 layers)`."""
    size = f"{format_bytes(progress.downloaded)} of {format_bytes(progress.total)}" if progress.total else "starting"
    return f"pulling image {image}: {size} ({progress.done_layers}/{progress.layers} layers)"


class PullEvents:
    """The `imagepull.PullReporter` of one reconcile of one project."""

    def __init__(
        self,
        project: v1.Project,
        *,
        client: Client,
        recorder: EventRecorder | None,
        clock: Clock,
        interval: float = PROGRESS_INTERVAL,
    ) -> None:
        self.latest = project
        self._client = client
        self._recorder = recorder
        self._clock = clock
        self._interval = interval
        self._started: dict[str, float] = {}
        self._written = float("-inf")

    async def _event(self, type_: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            await self._recorder.event(self.latest, type_, reason, message)

    async def pulling(self, service: str, image: str) -> None:
        self._started[service] = self._clock.monotonic()
        await self._event(NORMAL, REASON_PULLING, f"pulling image {image} for service {service}")

    async def progress(self, service: str, image: str, progress: PullProgress) -> None:
        if self._clock.monotonic() - self._written < self._interval:
            return
        self._written = self._clock.monotonic()
        updated = meta.copy(self.latest)
        status = next((s for s in updated.status.services if s.name == service), None)
        if status is None:
            status = updated.status.services.add(name=service, state="pending")
        status.message = progress_text(image, progress)
        try:
            self.latest = await self._client.projects.update_status(updated)
        except (Conflict, FailedPrecondition, NotFound, Forbidden):
            return  # the project moved on; its reconcile writes next

    async def pulled(self, service: str, image: str, size: int) -> None:
        took = self._clock.monotonic() - self._started.pop(service, self._clock.monotonic())
        message = f"pulled image {image} for service {service}: {format_bytes(size)} in {took:.1f}s"
        await self._event(NORMAL, REASON_PULLED, message)

    async def failed(self, service: str, image: str, message: str) -> None:
        self._started.pop(service, None)
        text = f"pulling image {image} for service {service} failed; the running container is kept: {message}"
        await self._event(WARNING, REASON_PULL_BACK_OFF, text)


__all__ = [
    "PROGRESS_INTERVAL",
    "PullEvents",
    "REASON_PULLED",
    "REASON_PULLING",
    "REASON_PULL_BACK_OFF",
    "progress_text",
]
