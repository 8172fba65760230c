"""One project's apply → Running cut into its hops, for `bench_agent.py`: the apiserver's write (Create's answer),
the bind (the Scheduled event seen on a watch: the scheduler's watch, decision and status write, or the benchmark's
own UpdateStatus), the agent's watch and work until Docker creates the container (Docker's `create` event), Docker's
create and start (its `start` event), and the agent's status write (the Running event seen on a watch).

Times of the watch events are when the benchmark's own watch saw them (as the next component would); Docker's are
the engine's own event times. All are wall-clock seconds (`time.time()`), the only clock Docker's events share.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.client import Client
from caravanserai.testing.builders import project

HOPS = ("apiserver_write", "bind", "agent_to_container_create", "docker_create_and_start", "status_write")


class DockerEvents:
    """`docker events` for the containers carrying `label` while open: (container name, action) → the engine's
    time."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.seen: dict[tuple[str, str], float] = {}
        self._changed = asyncio.Event()
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> DockerEvents:
        self._proc = await asyncio.create_subprocess_exec(
            "docker", "events", "--format", "{{json .}}", "--filter", "type=container",
            "--filter", f"label={self.label}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())
        await asyncio.sleep(0.3)  # the CLI subscribes before the first project arrives
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            await self._proc.wait()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        async for line in self._proc.stdout:
            event = json.loads(line)
            name = event.get("Actor", {}).get("Attributes", {}).get("name", "")
            self.seen.setdefault((name, event.get("Action", "")), event["timeNano"] / 1e9)
            self._changed.set()

    def create_to_start_p50_ms(self) -> float | None:
        """The median time from a container's create event to its start event, over those seen."""
        spans = [
            self.seen[(name, "start")] - created
            for (name, action), created in self.seen.items()
            if action == "create" and (name, "start") in self.seen
        ]
        return round(statistics.median(spans) * 1000, 1) if spans else None

    async def wait(self, name: str, action: str, timeout: float = 30.0) -> float:
        """The engine's time of `action` on container `name` (waits for it)."""
        deadline = time.monotonic() + timeout
        while (name, action) not in self.seen:
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), max(deadline - time.monotonic(), 0.001))
        return self.seen[(name, action)]


async def _phases(client: Client, name: str, since: str, seen: dict[str, float]) -> None:
    """Record when project `name` is first seen Scheduled (bound) and Running, until it is Running."""
    async for event in client.projects.watch(resource_version=since):
        if event.object.metadata.name != name:
            continue
        status = event.object.status
        if status.node_ref:
            seen.setdefault("bound", time.time())
        if status.phase == v1.RUNNING:
            seen["running"] = time.time()
            return
        if status.phase == v1.FAILED:
            raise RuntimeError(f"project {name} failed: {list(status.conditions)}")


async def one_by_one(
    client: Client,
    image: str,
    count: int,
    *,
    node: str,
    command: list[str],
    bind: Callable[[Client, str], Awaitable[None]] | None,
    until_gone: Callable[[str], Awaitable[None]],
) -> dict[str, Any]:
    """`count` one-service projects applied one after another (each once the previous one is Running and gone
    again): per project its apply → Running and each hop; the medians in ms. `bind`: how the benchmark binds
    (None: a scheduler does)."""
    totals: list[float] = []
    hops: dict[str, list[float]] = {hop: [] for hop in HOPS}
    async with DockerEvents(f"{naming.LABEL_NODE}={node}") as events:
        for i in range(count):
            name = f"single{i}"
            since = (await client.projects.list(limit=1)).resource_version
            seen: dict[str, float] = {}
            watcher = asyncio.create_task(_phases(client, name, since, seen))
            applied = time.time()
            await client.projects.create(project(name, image=image, command=command))
            written = time.time()
            if bind is not None:
                await bind(client, name)
            await asyncio.wait_for(watcher, timeout=120)
            container = naming.container_name(name, "svc0", node)
            created, started = await events.wait(container, "create"), await events.wait(container, "start")
            marks = [applied, written, seen["bound"], created, started, seen["running"]]
            for hop, begin, end in zip(HOPS, marks, marks[1:], strict=False):
                hops[hop].append(end - begin)
            totals.append(seen["running"] - applied)
            await client.projects.delete(name)
            await until_gone(name)
    return {
        "apply_to_running_p50_s": round(statistics.median(totals), 3),
        "apply_to_running_s": [round(t, 3) for t in totals],
        "hops_p50_ms": {hop: round(statistics.median(values) * 1000, 1) for hop, values in hops.items()},
    }
