"""The agent's Docker layer: every Docker Engine call goes through `DockerRuntime` (aiodocker).

Guarantees:

* **Idempotent.** `ensure_*` create what is missing and accept what exists; `remove_*` accept what is already
  gone. Calling any of them twice has the effect of calling it once.
* **Errors are wrapped.** aiodocker and aiohttp exceptions never leave the Docker room (`calls`): a daemon that
  cannot be reached is `DockerUnavailable` (retry later), a refusal is `DockerRefused` with Docker's status and
  message, and a failed pull is `ImagePullFailed`.
* **Pulls** within `pull_timeout` seconds, with registry credentials when given, reporting progress
  (`PullProgress`); whether to pull is the caller's decision (`ensure_image` pulls only a missing image).
* **Typed results.** Calls return the records of `records` (summaries, observed state, daemon facts, events),
  never Docker's JSON; those parsers are the only readers of Docker's documents in the agent.
* **Two connection pools.** Short calls share a pooled client with a request timeout; long streams (follow
  logs, events: `streams`) use a second client without a connection limit or read timeout, so streams never
  starve calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiodocker
import aiohttp
import structlog

from caravanserai.agent.docker import records, streams
from caravanserai.agent.docker.calls import (
    CALL_TIMEOUT,
    STREAM_TIMEOUT,
    UNREACHABLE,
    DockerError,
    DockerRefused,
    DockerUnavailable,
    ImagePullFailed,
    client,
    docker_call,
    present,
    wrap_error,
)
from caravanserai.agent.docker.records import (
    ContainerEvent,
    ContainerSummary,
    DaemonInfo,
    ImageSummary,
    NetworkSummary,
    Observed,
    PullProgress,
    PullTally,
    VolumeInfo,
    VolumeSummary,
    since_text,
)
from caravanserai.agent.docker.streams import FRAME_HEADER, STREAM_NAMES, frame_header
from caravanserai.project.registryauth import DOCKER_HUB, RegistryCredential, registry_of
from caravanserai.text.addresses import DEFAULT_DOCKER_HOST

log = structlog.get_logger(__name__)


class DockerRuntime:
    """Typed, idempotent Docker operations for the agent. Create with `DockerRuntime.connect(url)`."""

    def __init__(self, api: aiodocker.Docker, streams: aiodocker.Docker, *, pull_timeout: float = 600.0) -> None:
        self.api = api
        self.streams = streams
        self.pull_timeout = pull_timeout

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls, url: str = DEFAULT_DOCKER_HOST, *, pull_timeout: float = 600.0
    ) -> AsyncIterator[DockerRuntime]:
        """Open both clients for the daemon at `url`; they are closed on exit."""
        api = client(url, timeout=CALL_TIMEOUT, limit=100)
        stream_client = client(url, timeout=STREAM_TIMEOUT, limit=0)
        try:
            yield cls(api, stream_client, pull_timeout=pull_timeout)
        finally:
            await api.close()
            await stream_client.close()
            await api.connector.close()
            await stream_client.connector.close()

    # ---- daemon ------------------------------------------------------------------------------------------

    async def info(self) -> DaemonInfo:
        """The daemon's facts from `docker info` (version, data root, cpus, memory, OS)."""
        async with docker_call("docker info"):
            return records.daemon_info(await self.api.system.info())

    # ---- images ------------------------------------------------------------------------------------------

    async def image_present(self, image: str) -> bool:
        return await present(f"inspect image {image}", lambda: self.api.images.inspect(image))

    async def ensure_image(self, image: str) -> bool:
        """Make `image` present; pull it only when missing. Returns True when it was pulled."""
        if await self.image_present(image):
            return False
        await self.pull_image(image)
        return True

    async def list_images(self) -> list[ImageSummary]:
        """Every image present (`GET /images/json`), with its references and size."""
        async with docker_call("list images"):
            return records.image_summaries(await self.api.images.list())

    async def image_size(self, image: str) -> int:
        """The size of a present image in bytes (0 when Docker does not say)."""
        async with docker_call(f"inspect image {image}"):
            return records.image_size(await self.api.images.inspect(image))

    async def pull_image(
        self,
        image: str,
        *,
        auth: RegistryCredential | None = None,
        on_progress: Callable[[PullProgress], Awaitable[None]] | None = None,
    ) -> int:
        """Pull `image` (with `auth` for its registry), telling `on_progress` how far it got; its size in bytes.

        Raises ImagePullFailed with Docker's (the registry's) message when the pull fails or exceeds
        `pull_timeout`; DockerUnavailable when the daemon cannot be reached.
        """
        log.info("pulling image", image=image, registry_auth=auth is not None)
        credentials = None if auth is None else {"username": auth.username, "password": auth.password}
        # aiodocker sends credentials only with a registry host in the name: Docker Hub's implicit one made explicit.
        implicit_hub = registry_of(image) == DOCKER_HUB and image.partition("/")[0] not in (
            "docker.io",
            "index.docker.io",
        )
        name = f"{DOCKER_HUB}/{image}" if auth is not None and implicit_hub else image
        tally = PullTally()
        try:
            async with asyncio.timeout(self.pull_timeout):
                async for doc in self.api.images.pull(name, auth=credentials, stream=True):
                    error = PullTally.error(doc)
                    if error:
                        raise ImagePullFailed(500, error)
                    progress = tally.add(doc)
                    if on_progress is not None:
                        await on_progress(progress)
        except aiodocker.DockerError as exc:
            if exc.status == UNREACHABLE:
                raise wrap_error(exc, f"pull {image}") from exc
            raise ImagePullFailed(exc.status, exc.message) from exc
        except TimeoutError as exc:
            raise ImagePullFailed(408, f"pulling {image} took longer than {self.pull_timeout:g}s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise wrap_error(exc, f"pull {image}") from exc
        return await self.image_size(image)

    # ---- networks and volumes ----------------------------------------------------------------------------

    async def ensure_network(self, config: Mapping[str, Any]) -> None:
        """Create the network described by `config` unless one with its name exists."""
        name = config["Name"]
        async with docker_call(f"create network {name}"):
            try:
                await self.api.networks.get(name)
                return
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise
            try:
                await self.api.networks.create(dict(config))
            except aiodocker.DockerError as exc:
                if exc.status != 409:  # created concurrently
                    raise

    async def network_present(self, name: str) -> bool:
        """Whether a network of that name (or id) exists."""
        return await present(f"inspect network {name}", lambda: self.api.networks.get(name))

    async def remove_network(self, name: str) -> None:
        """Remove a network; an absent one is fine."""
        async with docker_call(f"remove network {name}"):
            try:
                await aiodocker.networks.DockerNetwork(self.api, name).delete()
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise

    async def ensure_volume(self, config: Mapping[str, Any]) -> None:
        """Create a volume (Docker returns the existing one when the name is taken)."""
        async with docker_call(f"create volume {config['Name']}"):
            await self.api.volumes.create(dict(config))

    async def remove_volume(self, name: str) -> None:
        """Remove a volume; an absent one is fine."""
        async with docker_call(f"remove volume {name}"):
            try:
                await aiodocker.volumes.DockerVolume(self.api, name).delete()
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise

    async def inspect_volume(self, name: str) -> VolumeInfo | None:
        """A volume's mountpoint, labels and creation time; None when there is no volume of that name."""
        async with docker_call(f"inspect volume {name}"):
            try:
                return records.volume_info(await aiodocker.volumes.DockerVolume(self.api, name).show())
            except aiodocker.DockerError as exc:
                if exc.status == 404:
                    return None
                raise

    async def list_networks(self, label_filter: list[str]) -> list[NetworkSummary]:
        """Networks carrying every label of `label_filter` (`key=value` strings)."""
        async with docker_call("list networks"):
            found = await self.api.networks.list(filters={"label": label_filter})
            return [records.network_summary(n) for n in found]

    async def list_volumes(self, label_filter: list[str]) -> list[VolumeSummary]:
        """Volumes carrying every label of `label_filter`."""
        async with docker_call("list volumes"):
            result = await self.api.volumes.list(filters={"label": label_filter})
            return records.volume_summaries(result)

    # ---- containers --------------------------------------------------------------------------------------

    async def list_containers(
        self, label_filter: list[str], *, network: str = "", volume: str = ""
    ) -> list[ContainerSummary]:
        """Summaries (`GET /containers/json?all=1`) of the containers carrying every label of `label_filter` (and,
        given `network`, configured on that network, given `volume`, mounting that volume; running or not)."""
        filters: dict[str, list[str]] = {"label": label_filter}
        if network:
            filters["network"] = [network]
        if volume:
            filters["volume"] = [volume]
        async with docker_call("list containers"):
            found = await self.api.containers.list(all=True, filters=json.dumps(filters))
            return [records.listed_container(c) for c in found]

    async def inspect_container(self, name_or_id: str) -> Observed | None:
        """The observed state of a container, or None when there is none."""
        async with docker_call(f"inspect container {name_or_id}"):
            try:
                return records.observe(await self.api.containers.container(name_or_id).show())
            except aiodocker.DockerError as exc:
                if exc.status == 404:
                    return None
                raise

    async def create_container(self, name: str, config: Mapping[str, Any]) -> str:
        """Create a container; returns its id."""
        async with docker_call(f"create container {name}"):
            container = await self.api.containers.create(dict(config), name=name)
            return container.id

    async def start_container(self, container_id: str) -> None:
        """Start a container (starting a running one is fine)."""
        async with docker_call(f"start container {container_id[:12]}"):
            await self.api.containers.container(container_id).start()

    async def rename_container(self, container_id: str, name: str) -> None:
        """Give a container another name (running or not; its network addresses and aliases stay)."""
        async with docker_call(f"rename container {container_id[:12]} to {name}"):
            await self.api.containers.container(container_id).rename(name)

    async def stop_container(self, container_id: str, *, timeout: int) -> None:
        """Stop a container: SIGTERM (or its StopSignal), SIGKILL after `timeout` seconds. Absent is fine."""
        async with docker_call(f"stop container {container_id[:12]}"):
            try:
                await self.api.containers.container(container_id).stop(t=timeout)
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise

    def log_frames(self, container_id: str, *, follow: bool, tail: str) -> AsyncIterator[tuple[str, str]]:
        """(stream, text) of each log frame of a container, on the stream client (see `streams.log_frames`)."""
        return streams.log_frames(self.streams, container_id, follow=follow, tail=tail)

    def container_events(
        self, label_filter: list[str], *, actions: tuple[str, ...], since: str
    ) -> AsyncGenerator[ContainerEvent, None]:
        """Container events of containers carrying every label of `label_filter`, from `since` on, on the stream
        client (see `streams.container_events`). Use it with `contextlib.aclosing`."""
        return streams.container_events(self.streams, label_filter, actions=actions, since=since)

    async def remove_container(self, container_id: str, *, timeout: int) -> None:
        """Stop (with `timeout`) and remove a container; absent or already being removed is fine."""
        await self.stop_container(container_id, timeout=timeout)
        async with docker_call(f"remove container {container_id[:12]}"):
            try:
                await self.api.containers.container(container_id).delete(force=True, v=True)
            except aiodocker.DockerError as exc:
                if exc.status == 404 or (exc.status == 409 and "already in progress" in exc.message):
                    return
                raise


__all__ = [
    "ContainerEvent",
    "ContainerSummary",
    "DaemonInfo",
    "DockerError",
    "DockerRefused",
    "DockerRuntime",
    "DockerUnavailable",
    "FRAME_HEADER",
    "ImagePullFailed",
    "ImageSummary",
    "NetworkSummary",
    "Observed",
    "STREAM_NAMES",
    "VolumeInfo",
    "VolumeSummary",
    "frame_header",
    "since_text",
    "wrap_error",
]
