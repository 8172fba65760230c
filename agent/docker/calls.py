"""How the agent calls the Docker Engine, and how a call fails: the error tree, the one wrapping of aiodocker and
aiohttp exceptions, and the aiodocker clients.

Guarantees:

* **Errors are wrapped here.** Inside `docker_call(what)` (and in `present`) an aiodocker or aiohttp exception
  (or an OSError or timeout) leaves as a `DockerError`: `DockerUnavailable` when the daemon cannot be reached or
  did not answer in time (retry later), `DockerRefused` with Docker's status and message otherwise. The modules
  of the Docker room wrap every call this way, so no foreign exception leaves the room.
* `present(what, inspect)` is the one "does it exist" lookup: a 404 is False, any other failure a `DockerError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiodocker
import aiohttp

from caravanserai.errors import CaravanseraiError

UNREACHABLE = 900  # aiodocker's status for a connection failure
CALL_TIMEOUT = aiohttp.ClientTimeout(total=120, connect=10)
STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=None)


class DockerError(CaravanseraiError):
    """A Docker Engine call failed. `status` is the HTTP status (900: not reachable)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class DockerUnavailable(DockerError):
    """The Docker daemon could not be reached or did not answer in time; retry later."""


class DockerRefused(DockerError):
    """The Docker daemon refused a request (bad configuration, conflict, missing object …)."""


class ImagePullFailed(DockerError):
    """An image is missing and could not be pulled; `message` is Docker's explanation."""


def wrap_error(exc: BaseException, what: str) -> DockerError:
    """The agent's error for an aiodocker/aiohttp failure of `what`."""
    if isinstance(exc, aiodocker.DockerError):
        cls = DockerUnavailable if exc.status == UNREACHABLE else DockerRefused
        return cls(exc.status, f"{what}: {exc.message}")
    if isinstance(exc, TimeoutError):
        return DockerUnavailable(UNREACHABLE, f"{what}: Docker did not answer in time")
    return DockerUnavailable(UNREACHABLE, f"{what}: {exc}")


@contextlib.asynccontextmanager
async def docker_call(what: str) -> AsyncIterator[None]:
    """Run the block's Docker call; its aiodocker/aiohttp/OS/timeout failure leaves as `wrap_error(exc, what)`."""
    try:
        yield
    except (aiodocker.DockerError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise wrap_error(exc, what) from exc


async def present(what: str, inspect: Callable[[], Awaitable[Any]]) -> bool:
    """Whether the object `inspect()` looks up exists: True when it answers, False on 404, DockerError otherwise."""
    async with docker_call(what):
        try:
            await inspect()
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return False
            raise
        return True


def client(url: str, *, timeout: aiohttp.ClientTimeout, limit: int) -> aiodocker.Docker:
    """An aiodocker client for `url` (unix://path or tcp://host:port) with its own connector."""
    if url.startswith("unix://"):
        connector: aiohttp.BaseConnector = aiohttp.UnixConnector(path=url[len("unix://") :], limit=limit)
        return aiodocker.Docker(url="unix://localhost", connector=connector, timeout=timeout)
    connector = aiohttp.TCPConnector(limit=limit)
    return aiodocker.Docker(url=url, connector=connector, timeout=timeout)


__all__ = [
    "CALL_TIMEOUT",
    "DockerError",
    "DockerRefused",
    "DockerUnavailable",
    "ImagePullFailed",
    "STREAM_TIMEOUT",
    "UNREACHABLE",
    "client",
    "docker_call",
    "present",
    "wrap_error",
]
