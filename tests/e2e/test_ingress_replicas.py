"""Zero failed requests through the ingress while replicas roll, a node drains and a start-first update runs.

Two real agents; a client process sends a constant 50 requests per second through the ingress of one of them and
counts every request that does not answer 200. The replicas carry one controller owner reference (the uid of a set that
need not exist: the data path reads only the uid).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE

import pytest
from agent_harness import RunningAgent, StartAgent, bind, wait_phase
from test_ingress import SERVE

from caravanserai import meta, v1
from caravanserai.client import Client, nodeops
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

RATE = 50.0  # requests per second
SET_UID = "5e7a11ce-0000-4000-8000-000000000025"


def web(name: str, image: str, *, revision: str, host: str = "app.example.com", owned: bool = True) -> v1.Project:
    p = project(name, image=image, services=["web"], command=["sh", "-c", SERVE])
    p.spec.services[0].env.add(name="REVISION", value=revision)
    ingress = p.spec.ingress.add(name="site", host=host)
    ingress.target.service, ingress.target.port = "web", 8080
    ingress.access.scope = "Public"
    check = p.spec.services[0].healthcheck
    check.tcp.port, check.interval, check.timeout, check.retries = 8080, "1s", "1s", 3
    if owned:
        p.metadata.owner_references.add(
            api_version="caravanserai/v1", kind="ProjectSet", name="app", uid=SET_UID, controller=True
        )
    return p


@dataclass
class Stream:
    """What the request stream counted: answered 200, and every other outcome (status or exception)."""

    ok: int = 0
    failures: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def request_stream(agent: RunningAgent, *hosts: str) -> AsyncIterator[Stream]:
    """GET /index.html through `agent`'s ingress at `RATE` per second (hosts in turn) until the block ends, from a
    process of its own (`request_stream.py`); the counts are filled in when the block ends."""
    url = f"http://127.0.0.1:{agent.agent.ingress_port}/index.html"
    script = str(Path(__file__).with_name("request_stream.py"))
    process = await asyncio.create_subprocess_exec(
        sys.executable, script, url, str(RATE), *hosts, stdin=PIPE, stdout=PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    stream = Stream()
    try:
        assert (await asyncio.wait_for(process.stdout.readline(), 30)).strip() == b"streaming"
        yield stream
    finally:
        process.stdin.close()
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    counts = json.loads(output)
    stream.ok, stream.failures = counts["ok"], counts["failures"]


async def ready(client: Client, name: str, node: str) -> v1.Project:
    """Bind `name` to `node` and wait until its service is ready."""
    await bind(client, name, node)

    async def served() -> v1.Project | None:
        p = await client.projects.get(name)
        ok = p.status.phase == v1.RUNNING and all(s.ready for s in p.status.services) and not p.status.previous_node_ref
        return p if ok else None

    return await wait_for(served, timeout=30, message=f"project {name} ready")


async def delete(client: Client, name: str) -> None:
    await client.projects.delete(name)
    await wait_phase(client, name, v1.TERMINATED, timeout=20)


async def test_a_rolling_update_of_four_replicas_drops_no_request(
    client: Client, start_agent: StartAgent, image: str
) -> None:
    one, two = await start_agent(), await start_agent()
    nodes = [one.node, two.node]
    for i in range(4):
        await client.projects.create(web(f"app-{i}", image, revision="1"))
    await asyncio.gather(*(ready(client, f"app-{i}", nodes[i % 2]) for i in range(4)))
    async with request_stream(one, "app.example.com") as stream:
        await asyncio.sleep(1)
        for i in range(4):  # one at a time, as a rolling update with maxSurge 1 and maxUnavailable 0 would
            await client.projects.create(web(f"app-{i}-r2", image, revision="2"))
            await ready(client, f"app-{i}-r2", nodes[i % 2])
            await delete(client, f"app-{i}")
        await asyncio.sleep(1)
    assert stream.failures == [] and stream.ok > 4 * RATE


async def test_a_drain_drops_no_request(client: Client, start_agent: StartAgent, image: str) -> None:
    one, two = await start_agent(), await start_agent()
    replicas = {"app-0": one.node, "app-1": one.node, "app-2": two.node, "solo": one.node}
    for name in replicas:
        await client.projects.create(
            web(
                name,
                image,
                revision="1",
                host="solo.example.com" if name == "solo" else "app.example.com",
                owned=name != "solo",
            )
        )
    await asyncio.gather(*(ready(client, name, node) for name, node in replicas.items()))
    async with request_stream(two, "app.example.com", "solo.example.com") as stream:  # replicas and a single one
        await asyncio.sleep(1)
        now = time.time()
        for name, node in replicas.items():  # `caractrl drain` of node one: each moved with a hand-off
            if node == one.node:
                assert await nodeops.move_project(client, name, one.node, now=now, handoff_until=now + 60)
        await asyncio.sleep(0.5)  # the old copies keep serving while nothing runs elsewhere yet
        await asyncio.gather(*(ready(client, name, two.node) for name, node in replicas.items() if node == one.node))
        await asyncio.sleep(1)
    assert stream.failures == [] and stream.ok > 2 * RATE


async def test_a_start_first_update_drops_no_request(client: Client, start_agent: StartAgent, image: str) -> None:
    one, two = await start_agent(), await start_agent()
    single = web("single", image, revision="1", host="single.example.com", owned=False)
    single.spec.update.order = v1.UPDATE_START_FIRST
    await client.projects.create(single)
    before = await ready(client, "single", two.node)
    async with request_stream(one, "single.example.com") as stream:
        await asyncio.sleep(1)
        changed = meta.copy(before)
        changed.spec.services[0].env[0].value = "2"
        await client.projects.update(changed)

        async def replaced() -> bool:
            p = await client.projects.get("single")
            service = p.status.services[0]
            return service.ready and service.container_id != before.status.services[0].container_id

        await wait_for(replaced, timeout=30, message="the service replaced start-first")
        await asyncio.sleep(1)
    assert stream.failures == [] and stream.ok > 2 * RATE
