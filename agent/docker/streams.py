"""The Engine's two long streams, read on the adapter's stream client: a container's multiplexed log frames and
the filtered stream of container events. `DockerRuntime.log_frames` and `DockerRuntime.container_events` are
these, bound to the runtime's stream client.

Guarantees:

* **Log frames**: (stream, text) per frame of both streams in one request, in Docker's own order; an absent
  container yields nothing; the response is closed when the iteration ends.
* **Events**: Docker filters them (type, labels, actions); the stream's own failure is raised, and closing the
  generator stops the reader and leaves no task behind.
* Failures leave as `DockerError`s (`calls.wrap_error`).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiodocker
import aiohttp

from caravanserai.agent.docker import records
from caravanserai.agent.docker.calls import wrap_error
from caravanserai.agent.docker.records import ContainerEvent

# Docker's multiplexed log stream: each frame is an 8-byte header (stream type, 3 zero bytes, big-endian size).
FRAME_HEADER = struct.Struct(">BxxxL")
STREAM_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}


def frame_header(header: bytes) -> tuple[str, int]:
    """(stream name, payload size) of a multiplexed log frame header."""
    kind, size = FRAME_HEADER.unpack(header)
    return STREAM_NAMES.get(kind, "stdout"), size


async def log_frames(
    streams: aiodocker.Docker, container_id: str, *, follow: bool, tail: str
) -> AsyncIterator[tuple[str, str]]:
    """(stream, text) of each log frame of a container, both streams in one request, with timestamps.

    One request keeps Docker's own order and makes `tail` ("all" or a count) count lines of both streams
    together (Docker filters streams after tailing). aiodocker's `log()` merges the two streams, so the
    multiplexed response is read here (containers made by the agent have no TTY). An absent container yields
    nothing.
    """
    params: dict[str, bool | str] = {"stdout": True, "stderr": True, "timestamps": True, "follow": follow, "tail": tail}
    what = f"logs of {container_id[:12]}"
    try:
        # aiodocker has no public call that returns the raw multiplexed response: its private `_query` does.
        async with streams._query(f"containers/{container_id}/logs", params=params) as response:  # noqa: SLF001
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
    streams: aiodocker.Docker, label_filter: list[str], *, actions: tuple[str, ...], since: str
) -> AsyncGenerator[ContainerEvent, None]:
    """Container events (`actions` only) of containers carrying every label of `label_filter`, from `since`
    (Docker's seconds.nanoseconds, see `records.since_text`) on, until the stream ends. A failed stream raises
    `DockerError`. Use it with `contextlib.aclosing`."""
    events = streams.events
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


__all__ = ["FRAME_HEADER", "STREAM_NAMES", "container_events", "frame_header", "log_frames"]
