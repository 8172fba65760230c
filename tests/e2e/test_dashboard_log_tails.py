"""Log tails abandoned by the browser release everything down to Docker: the dashboard's stream to the agent and
the agent's log stream from Docker (a real apiserver, an agent on Docker and the dashboard, all in this process)."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import aiohttp
import pytest
from agent_harness import StartAgent, bind, wait_phase

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for
from support.dashboard import RunningDashboard, dashboard

TAILS = 20


def unix_sockets() -> int:
    """Unix-domain sockets this process holds open: its connections to Docker's socket, plus a constant few
    (asyncio's self-pipes). gRPC and HTTP between the dashboard, the agent and the API are TCP, not counted."""
    unix = {line.split()[6] for line in _lines("/proc/self/net/unix")}  # Num RefCount … Type St Inode [Path]
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in unix:
            held += 1
    return held


def _lines(path: str) -> list[str]:
    return Path(path).read_text().splitlines()[1:]


Tail = tuple[aiohttp.ClientSession, aiohttp.ClientResponse]


async def first_line(d: RunningDashboard, name: str) -> Tail | None:
    """An open log tail of `name` whose first line came; None while the dashboard refuses it (its cache has not
    seen the project bound yet)."""
    session = d.session()
    response = await session.get(d.url + f"api/v1/projects/{name}/logs?tail=5")
    if response.status != 200:
        await abandon((session, response))
        return None
    while (line := await response.content.readline()) != b"event: line\n":
        assert line, "the tail ended before its first line"
    return session, response


async def open_tail(d: RunningDashboard, name: str) -> Tail:
    """An open log tail of `name` whose first line came, once the dashboard serves it."""
    tail: Tail | None = await wait_for(lambda: first_line(d, name), 20, message="a log tail")
    assert tail is not None
    return tail


async def abandon(tail: Tail) -> None:
    """Close the tail's connection without a word, as a browser leaving the page does."""
    session, response = tail
    response.close()
    await session.close()


@pytest.mark.docker
async def test_abandoned_log_tails_close_the_agents_docker_streams(
    api: RunningApiServer, client: Client, start_agent: StartAgent, image: str
) -> None:
    node = await start_agent()
    name = f"tails-{uuid.uuid4().hex[:6]}"
    # One line, then silence: a tail of it gets no more lines to write, so only the browser's going can end it.
    await client.projects.create(project(name, image=image, command=["sh", "-c", "echo started; exec sleep 3600"]))
    await bind(client, name, node.node)
    await wait_phase(client, name, v1.RUNNING, timeout=60)
    async with dashboard(api.address) as d:
        first = await open_tail(d, name)
        await abandon(first)
        baseline = await settled()
        tails = [await open_tail(d, name) for _ in range(TAILS)]
        during = unix_sockets()
        assert during >= baseline + TAILS, f"the tails hold Docker streams: {baseline} → {during}"
        for tail in tails:
            await abandon(tail)

        async def released() -> bool:
            return unix_sockets() <= baseline

        await wait_for(released, 15, message=f"the agent's Docker streams closed (baseline {baseline})")


async def settled() -> int:
    """The unix-socket count once it stayed the same for half a second (the first tail's stream closing)."""
    previous = -1
    for _ in range(40):
        now = unix_sockets()
        if now == previous:
            return now
        previous = now
        await asyncio.sleep(0.5)
    return previous
