"""The agent's Docker layer: every Docker Engine call goes through `DockerRuntime` (aiodocker).

Guarantees:

* **Idempotent.** `ensure_*` create what is missing and accept what exists; `remove_*` accept what is already
  gone. Calling any of them twice has the effect of calling it once.
* **Errors are wrapped here.** aiodocker and aiohttp exceptions never leave this module: a daemon that cannot
  be reached is `DockerUnavailable` (retry later), a refusal is `DockerRefused` with Docker's status and message,
  and a failed pull is `ImagePullFailed`.
* **Pulls** within `pull_timeout` seconds, with registry credentials when given, reporting progress
  (`PullProgress`); whether to pull is the caller's decision (`ensure_image` pulls only a missing image).
* **Typed results.** Calls return the records of `records` (summaries, observed state, daemon facts,
  events), never Docker's JSON; those parsers are the only readers of Docker's documents in the agent.
* **Two connection pools.** Short calls share a pooled client with a request timeout; long streams (follow
  logs, events) use a second client without a connection limit or read timeout, so streams never starve calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiodocker
import aiohttp
import structlog

from caravanserai.agent.docker import records
from caravanserai.agent.docker.records import (
    ContainerEvent,
    ContainerSummary,
    DaemonInfo,
    NetworkSummary,
    Observed,
    PullProgress,
    PullTally,
    VolumeSummary,
    since_text,
)
from caravanserai.errors import CaravanseraiError
from caravanserai.project.registryauth import DOCKER_HUB, RegistryCredential, registry_of

log = structlog.get_logger(__name__)

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
UNREACHABLE = 900  # aiodocker's status for a connection failure
CALL_TIMEOUT = aiohttp.ClientTimeout(total=120, connect=10)
STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=None)
_SUMMARY_KEYS = ("Id", "Names", "Image", "Labels", "State", "Status", "Created", "NetworkSettings")
# Docker's multiplexed log stream: each frame is an 8-byte header (stream type, 3 zero bytes, big-endian size).
FRAME_HEADER = struct.Struct(">BxxxL")
STREAM_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}


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
async def _docker_call(what: str) -> AsyncIterator[None]:
    try:
        yield
    except (aiodocker.DockerError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise wrap_error(exc, what) from exc


async def _present(what: str, inspect: Callable[[], Awaitable[Any]]) -> bool:
    """Whether the object `inspect()` looks up exists: True when it answers, False on 404, DockerError otherwise."""
    async with _docker_call(what):
        try:
            await inspect()
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _client(url: str, *, timeout: aiohttp.ClientTimeout, limit: int) -> aiodocker.Docker:
    """An aiodocker client for `url` (unix://path or tcp://host:port) with its own connector."""
    if url.startswith("unix://"):
        connector: aiohttp.BaseConnector = aiohttp.UnixConnector(path=url[len("unix://") :], limit=limit)
        return aiodocker.Docker(url="unix://localhost", connector=connector, timeout=timeout)
    connector = aiohttp.TCPConnector(limit=limit)
    return aiodocker.Docker(url=url, connector=connector, timeout=timeout)


def frame_header(header: bytes) -> tuple[str, int]:
    """(stream name, payload size) of a multiplexed log frame header."""
    kind, size = FRAME_HEADER.unpack(header)
    return STREAM_NAMES.get(kind, "stdout"), size


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
        api = _client(url, timeout=CALL_TIMEOUT, limit=100)
        streams = _client(url, timeout=STREAM_TIMEOUT, limit=0)
        try:
            yield cls(api, streams, pull_timeout=pull_timeout)
        finally:
            await api.close()
            await streams.close()
            await api.connector.close()
            await streams.connector.close()

    # ---- daemon ------------------------------------------------------------------------------------------

    async def info(self) -> DaemonInfo:
        """The daemon's facts from `docker info` (version, data root, cpus, memory, OS)."""
        async with _docker_call("docker info"):
            return records.daemon_info(await self.api.system.info())

    # ---- images ------------------------------------------------------------------------------------------

    async def image_present(self, image: str) -> bool:
        return await _present(f"inspect image {image}", lambda: self.api.images.inspect(image))

    async def ensure_image(self, image: str) -> bool:
        """Make `image` present; pull it only when missing. Returns True when it was pulled."""
        if await self.image_present(image):
            return False
        await self.pull_image(image)
        return True

    async def image_size(self, image: str) -> int:
        """The size of a present image in bytes (0 when Docker does not say)."""
        async with _docker_call(f"inspect image {image}"):
            return int((await self.api.images.inspect(image)).get("Size") or 0)

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
        implicit_hub = registry_of(image) == DOCKER_HUB and image.partition("/")[0] not in ("docker.io", "index.docker.io")
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
        async with _docker_call(f"create network {name}"):
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
        return await _present(f"inspect network {name}", lambda: self.api.networks.get(name))

    async def remove_network(self, name: str) -> None:
        """Remove a network; an absent one is fine."""
        async with _docker_call(f"remove network {name}"):
            try:
                await aiodocker.networks.DockerNetwork(self.api, name).delete()
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise

    async def ensure_volume(self, config: Mapping[str, Any]) -> None:
        """Create a volume (Docker returns the existing one when the name is taken)."""
        async with _docker_call(f"create volume {config['Name']}"):
            await self.api.volumes.create(dict(config))

    async def remove_volume(self, name: str) -> None:
        """Remove a volume; an absent one is fine."""
        async with _docker_call(f"remove volume {name}"):
            try:
                await aiodocker.volumes.DockerVolume(self.api, name).delete()
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise

    async def list_networks(self, label_filter: list[str]) -> list[NetworkSummary]:
        """Networks carrying every label of `label_filter` (`key=value` strings)."""
        async with _docker_call("list networks"):
            found = await self.api.networks.list(filters={"label": label_filter})
            return [records.network_summary(n) for n in found]

    async def list_volumes(self, label_filter: list[str]) -> list[VolumeSummary]:
        """Volumes carrying every label of `label_filter`."""
        async with _docker_call("list volumes"):
            result = await self.api.volumes.list(filters={"label": label_filter})
            return [records.volume_summary(v) for v in result.get("Volumes") or []]

    # ---- containers --------------------------------------------------------------------------------------

    async def list_containers(self, label_filter: list[str], *, network: str = "") -> list[ContainerSummary]:
        """Summaries (`GET /containers/json?all=1`) of the containers carrying every label of `label_filter` (and,
        given `network`, configured on that network, running or not)."""
        filters: dict[str, list[str]] = {"label": label_filter}
        if network:
            filters["network"] = [network]
        async with _docker_call("list containers"):
            found = await self.api.containers.list(all=True, filters=json.dumps(filters))
            return [records.container_summary({k: c[k] for k in _SUMMARY_KEYS if k in c}) for c in found]

    async def inspect_container(self, name_or_id: str) -> Observed | None:
        """The observed state of a container, or None when there is none."""
        async with _docker_call(f"inspect container {name_or_id}"):
            try:
                return records.observe(await self.api.containers.container(name_or_id).show())
            except aiodocker.DockerError as exc:
                if exc.status == 404:
                    return None
                raise

    async def create_container(self, name: str, config: Mapping[str, Any]) -> str:
        """Create a container; returns its id."""
        async with _docker_call(f"create container {name}"):
            container = await self.api.containers.create(dict(config), name=name)
            return container.id

    async def start_container(self, container_id: str) -> None:
        """Start a container (starting a running one is fine)."""
        async with _docker_call(f"start container {container_id[:12]}"):
            await self.api.containers.container(container_id).start()

    async def stop_container(self, container_id: str, *, timeout: int) -> None:
        """Stop a container: SIGTERM (or its StopSignal), SIGKILL after `timeout` seconds. Absent is fine."""
        async with _docker_call(f"stop container {container_id[:12]}"):
            try:
                await self.api.containers.container(container_id).stop(t=timeout)
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise

    async def log_frames(self, container_id: str, *, follow: bool, tail: str) -> AsyncIterator[tuple[str, str]]:
        """(stream, text) of each log frame of a container, both streams in one request, with timestamps.

        One request keeps Docker's own order and makes `tail` ("all" or a count) count lines of both streams
        together (Docker filters streams after tailing). aiodocker's `log()` merges the two streams, so the
        multiplexed response is read here (containers made by the agent have no TTY). Runs on the stream client.
        An absent container yields nothing.
        """
        params: dict[str, bool | str] = {
            "stdout": True, "stderr": True, "timestamps": True, "follow": follow, "tail": tail
        }
        what = f"logs of {container_id[:12]}"
        try:
            async with self.streams._query(f"containers/{container_id}/logs", params=params) as response:
                try:
                    while True:
                        try:
                            stream, size = frame_header(await response.content.readexactly(FRAME_HEADER.size))
                            data = await response.content.readexactly(size)
                        except asyncio.IncompleteReadError:
                            return
                        yield stream, data.decode("utf-8", "replace")
                finally:
                    response.close()
        except aiodocker.DockerError as exc:
            if exc.status != 404:
                raise wrap_error(exc, what) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise wrap_error(exc, what) from exc

    async def container_events(
        self, label_filter: list[str], *, actions: tuple[str, ...], since: str
    ) -> AsyncGenerator[ContainerEvent, None]:
        """Container events (`actions` only) of containers carrying every label of `label_filter`, from `since`
        (Docker's seconds.nanoseconds, see `since_text`) on, until the stream ends. Filtered by Docker; runs on
        the stream client. A failed stream raises `DockerError`. Use it with `contextlib.aclosing`."""
        events = self.streams.events
        subscriber = events.subscribe(create_task=False)
        filters = {"type": ["container"], "label": label_filter, "event": list(actions)}
        reader = asyncio.create_task(events.run(filters=filters, since=since), name="docker-events")
        getter: asyncio.Future[Any] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(subscriber.get())
                await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    reader.result()  # raises the stream's error
                    return
                event = getter.result()
                if event is None:
                    return
                yield records.container_event(event)
        except (aiodocker.DockerError, aiohttp.ClientError, OSError) as exc:
            raise wrap_error(exc, "docker events") from exc
        finally:
            if getter is not None:
                getter.cancel()  # closed while waiting: the getter must not outlive the stream
            if not reader.done():
                await events.stop()
                reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def remove_container(self, container_id: str, *, timeout: int) -> None:
        """Stop (with `timeout`) and remove a container; absent or already being removed is fine."""
        await self.stop_container(container_id, timeout=timeout)
        async with _docker_call(f"remove container {container_id[:12]}"):
            try:
                await self.api.containers.container(container_id).delete(force=True, v=True)
            except aiodocker.DockerError as exc:
                if exc.status == 404 or (exc.status == 409 and "already in progress" in exc.message):
                    return
                raise


__all__ = [
    "DEFAULT_DOCKER_HOST",
    "ContainerEvent",
    "ContainerSummary",
    "DaemonInfo",
    "DockerError",
    "DockerRefused",
    "DockerRuntime",
    "DockerUnavailable",
    "FRAME_HEADER",
    "ImagePullFailed",
    "NetworkSummary",
    "Observed",
    "STREAM_NAMES",
    "VolumeSummary",
    "frame_header",
    "since_text",
    "wrap_error",
]
