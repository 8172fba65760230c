"""`Agent.Logs` (served by `access.service`) streams the stdout and stderr of a project's containers.

Guarantees:

* **Lines, labelled**: each `LogLine` is one log line of one service, tagged `stdout` or `stderr`, without its
  trailing newline; with `timestamps` it starts with Docker's RFC 3339 timestamp and a space.
* **Docker's order and tail**: each container's log is read in one request for both streams, so its lines come
  in Docker's order and `tail` (≥ 0) keeps that container's last `tail` lines of both streams together (as
  `docker logs --tail` and `docker compose logs --tail` do); a negative `tail` keeps everything.
* **Several services** (empty `service`): without `follow` their lines are merged by Docker's timestamps, each
  container's own order kept; with `follow` lines are sent as they arrive.
* **Follow without gaps or repeats**: the backlog and the new lines come from one Docker stream per container,
  until the client goes away or every followed container stopped.
* **Streams never starve the agent**: they run on the runtime's stream client, which has no connection limit.
* Unknown projects or services answer NOT_FOUND; Docker failures answer UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TypeVar

from caravanserai.agent.docker import naming
from caravanserai.agent.docker.engine import DockerRuntime
from caravanserai.api.v1 import api_pb2

STDOUT = "stdout"
STDERR = "stderr"
QUEUE_SIZE = 1024

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line: Docker's timestamp, the service, the stream and the text without newline."""

    timestamp: str
    service: str
    stream: str
    text: str

    def to_proto(self, *, timestamps: bool) -> api_pb2.LogLine:
        data = f"{self.timestamp} {self.text}" if timestamps and self.timestamp else self.text
        return api_pb2.LogLine(service=self.service, stream=self.stream, data=data.encode("utf-8", "replace"))


def parse_frame(frame: str, *, service: str, stream: str) -> LogEntry:
    """A LogEntry from one Docker log frame fetched with timestamps ("<timestamp> <text>\\n")."""
    line = frame[:-1] if frame.endswith("\n") else frame
    stamp, sep, text = line.partition(" ")
    if not sep or not stamp[:1].isdigit():
        return LogEntry("", service, stream, line)
    return LogEntry(stamp, service, stream, text)


def merge_by_time(backlogs: list[list[LogEntry]]) -> list[LogEntry]:
    """Interleave several containers' backlogs by timestamp, keeping each container's own order."""
    return list(heapq.merge(*backlogs, key=lambda entry: entry.timestamp))


async def merge_live(sources: list[AsyncIterator[T]]) -> AsyncIterator[T]:
    """Items of all `sources` as they arrive, until every source ends; the first source error is raised."""
    out: asyncio.Queue[T] = asyncio.Queue(maxsize=QUEUE_SIZE)

    async def pump(source: AsyncIterator[T]) -> None:
        async for item in source:
            await out.put(item)

    tasks = [asyncio.create_task(pump(source)) for source in sources]
    getter: asyncio.Future[T] | None = None
    try:
        while True:
            if not out.empty():
                yield out.get_nowait()
                continue
            for task in tasks:  # nothing queued: a failed source fails the merge, all ended ends it
                error = task.exception() if task.done() and not task.cancelled() else None
                if error is not None:
                    raise error
            running = {task for task in tasks if not task.done()}
            if not running:
                return
            getter = asyncio.ensure_future(out.get())
            await asyncio.wait({getter, *running}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()  # a source ended; an item put meanwhile stays queued
    finally:
        if getter is not None:
            getter.cancel()  # closed while waiting: the getter must not outlive the merge
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class LogStreamer:
    """Reads the logs of the containers this node's agent manages."""

    def __init__(self, runtime: DockerRuntime, *, node: str) -> None:
        self._runtime = runtime
        self._node = node

    async def containers(self, project: str, service: str = "") -> list[tuple[str, str]]:
        """(service, container id) of the containers of `project` (a key; a bare name is a `default` project's),
        optionally one service, sorted by service."""
        extra = {"project": project, **({"service": service} if service else {})}
        found = await self._runtime.list_containers(naming.node_filter(self._node, **extra))
        return sorted((c.label(naming.LABEL_SERVICE), c.id) for c in found)

    async def entries(self, service: str, container_id: str, *, follow: bool, tail: int) -> AsyncIterator[LogEntry]:
        """One container's lines: the last `tail` (all when negative), then new ones when following."""
        frames = self._runtime.log_frames(container_id, follow=follow, tail="all" if tail < 0 else str(tail))
        async for stream, text in frames:
            yield parse_frame(text, service=service, stream=stream)

    async def stream(self, request: api_pb2.LogsRequest) -> AsyncIterator[LogEntry]:
        """The lines a LogsRequest asks for. Raises LookupError when nothing matches."""
        project = naming.project_in(request.namespace, request.project)
        targets = await self.containers(project, request.service)
        if not targets:
            shown = naming.shown(project)
            what = f"service {request.service} of project {shown}" if request.service else f"project {shown}"
            raise LookupError(f"no containers for {what} on this node")
        if request.follow:
            sources = [self.entries(s, cid, follow=True, tail=request.tail) for s, cid in targets]
            async for entry in merge_live(sources):
                yield entry
            return
        backlogs = [[e async for e in self.entries(s, cid, follow=False, tail=request.tail)] for s, cid in targets]
        for entry in merge_by_time(backlogs):
            yield entry


__all__ = [
    "LogEntry",
    "LogStreamer",
    "STDERR",
    "STDOUT",
    "merge_by_time",
    "merge_live",
    "parse_frame",
]
