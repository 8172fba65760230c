"""Whether and how a service's image is pulled before its container is created: `imagePullPolicy`.

| policy | image present | image missing |
|---|---|---|
| `IfNotPresent` (default) | used as it is | pulled |
| `Always` | pulled again (a re-pushed tag is picked up) | pulled |
| `Never` | used as it is | `ServiceFailure` ErrImageNeverPull |

Guarantees:

* **Pulls happen only when a container is about to be created** (first start, spec or data change, `caractrl
  restart`); a running container is never replaced because its tag moved.
* **The old container stays until the new image is there.** A pull that fails while a container of the service
  exists and `Always` applies raises `PullBackOff`: the old container keeps running, a Warning Event says why, and
  the reconcile is retried with backoff. A failed pull with no container to fall back on is a `ServiceFailure`
  (ImagePullFailed) with Docker's (the registry's) message: the project becomes Failed.
* Registry credentials come from the project's `imagePullSecrets` (`ServiceInputs.auth`); progress, start and end
  of each pull go to a `PullReporter` (Events with size and time, the service's status message while it runs).
"""

from __future__ import annotations

from typing import Protocol

from caravanserai import v1
from caravanserai.agent.docker.containers import ServiceInputs
from caravanserai.agent.docker.engine import DockerRuntime, ImagePullFailed
from caravanserai.agent.docker.records import PullProgress
from caravanserai.agent.workload.failures import REASON_IMAGE_PULL_FAILED, REASON_NEVER_PULL, ServiceFailure
from caravanserai.errors import CaravanseraiError


class PullBackOff(CaravanseraiError):
    """A pull failed while the service's old container still runs: keep it, retry later with backoff."""


class PullReporter(Protocol):
    """Where pulls are reported (the agent: Events and the service's status message)."""

    async def pulling(self, service: str, image: str) -> None: ...

    async def progress(self, service: str, image: str, progress: PullProgress) -> None: ...

    async def pulled(self, service: str, image: str, size: int) -> None: ...

    async def failed(self, service: str, image: str, message: str) -> None: ...


class Unreported:
    """A reporter that reports nothing."""

    async def pulling(self, service: str, image: str) -> None:
        return None

    async def progress(self, service: str, image: str, progress: PullProgress) -> None:
        return None

    async def pulled(self, service: str, image: str, size: int) -> None:
        return None

    async def failed(self, service: str, image: str, message: str) -> None:
        return None


UNREPORTED = Unreported()


async def prepare_image(
    docker: DockerRuntime, service: v1.Service, inputs: ServiceInputs, reporter: PullReporter, *, replacing: bool
) -> None:
    """Make the service's image usable under its pull policy (see the module docstring). `replacing`: a container
    of the service exists and runs until the new one is created."""
    policy = service.image_pull_policy or v1.PULL_IF_NOT_PRESENT
    image = service.image
    if policy != v1.PULL_ALWAYS and await docker.image_present(image):
        return
    if policy == v1.PULL_NEVER:
        message = f"service {service.name}: image {image} is not on the node and imagePullPolicy is Never"
        raise ServiceFailure(REASON_NEVER_PULL, message)
    await reporter.pulling(service.name, image)
    try:
        size = await docker.pull_image(
            image, auth=inputs.auth, on_progress=lambda p: reporter.progress(service.name, image, p)
        )
    except ImagePullFailed as exc:
        if replacing and policy == v1.PULL_ALWAYS:
            await reporter.failed(service.name, image, exc.message)
            raise PullBackOff(
                f"service {service.name}: pulling {image} failed, old container kept: {exc.message}"
            ) from exc
        raise ServiceFailure(REASON_IMAGE_PULL_FAILED, f"service {service.name}: {exc.message}") from exc
    await reporter.pulled(service.name, image, size)


__all__ = [
    "PullBackOff",
    "PullReporter",
    "UNREPORTED",
    "Unreported",
    "prepare_image",
]
