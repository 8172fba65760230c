"""The agent's gRPC `Agent` service: `Logs` streams the stdout and stderr of a project's containers.

Guarantees:

* **Lines, labelled**: each `LogLine` is one log line of one service, tagged `stdout` or `stderr`, without its
  trailing newline; with `timestamps` it starts with Docker's RFC 3339 timestamp and a space.
* **Ordered**: the backlog is merged across streams and services by Docker's timestamps (fixed-width
  RFC3339Nano, so text order is time order), and `tail` (≥ 0) keeps the last `tail` lines of that merge;
  a negative `tail` keeps everything.
* **Follow without gaps or repeats**: with `follow`, the backlog is sent first, then new lines from the instant
  after the last backlog line (or after the request, when the backlog is empty) until the client goes away or
  every followed container stops.
* **Streams never starve the agent**: they run on the runtime's stream client, which has no connection limit.
* Unknown projects or services answer NOT_FOUND; Docker failures answer UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiodocker
import aiohttp
import grpc
import structlog

from caravanserai.agent import naming
from caravanserai.agent.runtime import DockerRuntime, DockerUnavailable
from caravanserai.api.v1 import api_pb2, api_pb2_grpc
from caravanserai.clock import Clock

log = structlog.get_logger(__name__)

STDOUT = "stdout"
STDERR = "stderr"


@dataclass(frozen=True, slots=True, order=True)
class LogEntry:
    """One line: Docker's timestamp (sort key), the service, the stream and the text without newline."""

    timestamp: str
    service: str
    stream: str
    text: str

    def to_proto(self, *, timestamps: bool) -> api_pb2.LogLine:
        data = f"{self.timestamp} {self.text}" if timestamps else self.text
        return api_pb2.LogLine(service=self.service, stream=self.stream, data=data.encode("utf-8", "replace"))


def parse_frame(frame: str, *, service: str, stream: str) -> LogEntry:
    """A LogEntry from one Docker log frame fetched with timestamps ("<timestamp> <text>\\n")."""
    line = frame[:-1] if frame.endswith("\n") else frame
    stamp, sep, text = line.partition(" ")
    if not sep or not stamp[:1].isdigit():
        return LogEntry("", service, stream, line)
    return LogEntry(stamp, service, stream, text)


def unix_time(stamp: str) -> str:
    """Docker's RFC 3339 UTC timestamp as the `seconds.nanoseconds` text its `since` parameter accepts."""
    base, _, rest = stamp.rstrip("Z").partition(".")
    seconds = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
    nanos = (rest + "000000000")[:9]
    return f"{seconds}.{nanos}"


def select_tail(entries: list[LogEntry], tail: int) -> list[LogEntry]:
    """`entries` sorted by time, keeping the last `tail` (all when `tail` < 0)."""
    ordered = sorted(entries)
    if tail < 0:
        return ordered
    return ordered[len(ordered) - tail :] if tail else []


class LogStreamer:
    """Reads the logs of the containers this node's agent manages."""

    def __init__(self, runtime: DockerRuntime, *, node: str, clock: Clock) -> None:
        self._docker = runtime.streams
        self._runtime = runtime
        self._node = node
        self._clock = clock

    async def containers(self, project: str, service: str = "") -> list[tuple[str, str]]:
        """(service, container id) of the project's containers, optionally one service, sorted by service."""
        extra = {"project": project, **({"service": service} if service else {})}
        found = await self._runtime.list_containers(naming.node_filter(self._node, **extra))
        pairs = [((c.get("Labels") or {}).get(naming.LABEL_SERVICE, ""), str(c["Id"])) for c in found]
        return sorted(pairs)

    async def _read(self, container_id: str, stream: str, **params: object) -> list[str]:
        container = self._docker.containers.container(container_id)
        try:
            frames: list[str] = await container.log(
                stdout=stream == STDOUT, stderr=stream == STDERR, timestamps=True, **params
            )
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return []
            raise DockerUnavailable(exc.status, f"logs of {container_id[:12]}: {exc.message}") from exc
        return frames

    async def backlog(self, service: str, container_id: str, *, tail: int) -> list[LogEntry]:
        """The last `tail` lines (all when negative) of both streams of one container, merged."""
        params: dict[str, object] = {"tail": "all" if tail < 0 else str(tail)}
        entries: list[LogEntry] = []
        for stream in (STDOUT, STDERR):
            frames = await self._read(container_id, stream, **params)
            entries.extend(parse_frame(f, service=service, stream=stream) for f in frames)
        return select_tail(entries, tail)

    async def _follow_one(
        self, service: str, container_id: str, stream: str, *, since: str, after: str, out: asyncio.Queue[LogEntry]
    ) -> None:
        container = self._docker.containers.container(container_id)
        flag = {"stdout": stream == STDOUT, "stderr": stream == STDERR}
        try:
            lines = container.log(**flag, follow=True, timestamps=True, since=since)
            async with contextlib.aclosing(lines):
                async for frame in lines:
                    entry = parse_frame(frame, service=service, stream=stream)
                    if not after or entry.timestamp > after:
                        await out.put(entry)
        except aiodocker.DockerError as exc:
            if exc.status != 404:
                raise DockerUnavailable(exc.status, f"logs of {container_id[:12]}: {exc.message}") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise DockerUnavailable(900, f"logs of {container_id[:12]}: {exc}") from exc

    async def follow(
        self, targets: list[tuple[str, str]], *, since: str, after: str
    ) -> AsyncIterator[LogEntry]:
        """New lines of every target's stdout and stderr from `since` (seconds.nanos), skipping lines not later
        than `after` (a timestamp; "" skips nothing), until every stream ends."""
        out: asyncio.Queue[LogEntry] = asyncio.Queue(maxsize=1024)
        tasks = [
            asyncio.create_task(self._follow_one(service, cid, stream, since=since, after=after, out=out))
            for service, cid in targets
            for stream in (STDOUT, STDERR)
        ]
        try:
            while True:
                getter = asyncio.create_task(out.get())
                pending = {t for t in tasks if not t.done()}
                await asyncio.wait({getter, *pending}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                    continue
                getter.cancel()
                for task in tasks:
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                if all(t.done() for t in tasks) and out.empty():
                    return
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def stream(self, request: api_pb2.LogsRequest) -> AsyncIterator[LogEntry]:
        """The lines a LogsRequest asks for. Raises LookupError when nothing matches."""
        targets = await self.containers(request.project, request.service)
        if not targets:
            what = f"service {request.service} of project {request.project}" if request.service else request.project
            raise LookupError(f"no containers for {what} on this node")
        started = self._clock.now()
        entries: list[LogEntry] = []
        for service, cid in targets:
            entries.extend(await self.backlog(service, cid, tail=request.tail))
        backlog = select_tail(entries, request.tail)
        for entry in backlog:
            yield entry
        if not request.follow:
            return
        stamped = [e.timestamp for e in entries if e.timestamp]
        last = max(stamped) if stamped else ""
        since = unix_time(last) if last else f"{started:.9f}"
        async for entry in self.follow(targets, since=since, after=last):
            yield entry


class AgentService(api_pb2_grpc.AgentServicer):
    """caravanserai.v1.Agent on the agent's --listen address."""

    def __init__(self, streamer: LogStreamer) -> None:
        self._streamer = streamer

    async def Logs(  # noqa: N802 - gRPC method name
        self, request: api_pb2.LogsRequest, context: grpc.aio.ServicerContext[api_pb2.LogsRequest, api_pb2.LogLine]
    ) -> AsyncIterator[api_pb2.LogLine]:
        if not request.project:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "project is required")
        try:
            async for entry in self._streamer.stream(request):
                yield entry.to_proto(timestamps=request.timestamps)
        except LookupError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except DockerUnavailable as exc:
            log.warning("log stream failed", project=request.project, service=request.service, error=str(exc))
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))


__all__ = [
    "STDERR",
    "STDOUT",
    "AgentService",
    "LogEntry",
    "LogStreamer",
    "parse_frame",
    "select_tail",
    "unix_time",
]
