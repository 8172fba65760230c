"""`cara-controller-manager` as real processes: two replicas on one Lease, exactly one acting at a time."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator

import pytest
from cluster_sim import add_node

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.controllers.manager import SETUPS
from caravanserai.errors import NotFound
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

LEASE = "cara-controller-manager"


async def start_replica(api: RunningApiServer, identity: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "caravanserai.controllers.manager",
        "--server", api.address,
        "--leader-elect-identity", identity,
        "--leader-elect-lease-duration", "3s",
        "--leader-elect-renew-deadline", "2s",
        "--leader-elect-retry-period", "250ms",
        "--metrics-port", "0",
        "--log-format", "json",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
async def replicas(api: RunningApiServer) -> AsyncIterator[dict[str, asyncio.subprocess.Process]]:
    procs: dict[str, asyncio.subprocess.Process] = {}
    yield procs
    for proc in procs.values():
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def holder(client: Client) -> str:
    try:
        return (await client.leases.get(LEASE)).spec.holder_identity
    except NotFound:
        return ""


async def bound_by(client: Client, names: list[str]) -> dict[str, str]:
    """Project → the replica that recorded its Scheduled event, once every project is bound."""

    async def check() -> dict[str, str] | None:
        items = {p.metadata.name: p for p in (await client.projects.list()).items}
        if any(items[n].status.phase != v1.SCHEDULED for n in names):
            return None
        events = (await client.events.list()).items
        hosts = {e.spec.involved_object.name: e.spec.source.host for e in events if e.spec.reason == "Scheduled"}
        return hosts if all(n in hosts for n in names) else None

    return await wait_for(check, 15, interval=0.1)


async def test_two_replicas_take_turns(
    api: RunningApiServer, client: Client, replicas: dict[str, asyncio.subprocess.Process]
) -> None:
    await add_node(client, "n1", cpu="64", memory="64Gi")
    replicas["a"] = await start_replica(api, "replica-a")

    async def a_leads() -> bool:
        return await holder(client) == "replica-a"

    await wait_for(a_leads, 15)
    replicas["b"] = await start_replica(api, "replica-b")
    first = [f"first-{i}" for i in range(8)]
    for name in first:
        await client.projects.create(project(name, requests={"cpu": "100m"}))
    hosts = await bound_by(client, first)
    assert {hosts[n] for n in first} == {"replica-a"}

    replicas["a"].send_signal(signal.SIGTERM)  # a clean stop releases the Lease
    assert await asyncio.wait_for(replicas["a"].wait(), 15) == 0

    async def b_leads() -> bool:
        return await holder(client) == "replica-b"

    await wait_for(b_leads, 15)
    second = [f"second-{i}" for i in range(8)]
    for name in second:
        await client.projects.create(project(name, requests={"cpu": "100m"}))
    hosts = await bound_by(client, first + second)
    assert {hosts[n] for n in first} == {"replica-a"}
    assert {hosts[n] for n in second} == {"replica-b"}

    replicas["b"].send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(replicas["b"].wait(), 15) == 0
    assert await holder(client) == ""  # released on the way out


async def test_a_bad_flag_is_one_line() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "caravanserai.controllers.manager", "--controllers", "scheduler,bogus",
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 2
    assert (
        err.decode().strip().splitlines()[-1].endswith(f"unknown controller(s) bogus; choose from {', '.join(SETUPS)}")
    )
