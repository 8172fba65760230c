"""Project anti-affinity end to end: two real agents (each its own host name), a `db` project Running on one, a
`web` project that must share a host with no db or web project Running on the other, and a second such project
left Pending with the anti-affinity reason (unavailable: it fits once one of them goes)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
from agent_harness import StartAgent, wait_phase

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.project.affinity import HOSTNAME_KEY
from caravanserai.testing.builders import project
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker


@contextlib.asynccontextmanager
async def scheduler(client: Client) -> AsyncIterator[None]:
    clock = SystemClock()
    manager = Manager(client, clock=clock, shutdown_timeout=5.0)
    scheduler_app.setup(manager, client, clock)
    async with running(manager):
        yield


def apart(name: str, image: str) -> v1.Project:
    """A web project that shares a host with no db and no other web project."""
    p = project(name, image=image, labels={"app": "web"})
    term = p.spec.affinity.project_anti_affinity.required.add(topology_key=HOSTNAME_KEY)
    term.label_selector.match_expressions.add(key="app", operator="In", values=["db", "web"])
    return p


async def reason(client: Client, name: str) -> str:
    p = await client.projects.get(name)
    cond = meta.get_condition(p.status.conditions, v1.CONDITION_SCHEDULED)
    return cond.message if p.status.phase == v1.PENDING and cond is not None and cond.status == v1.FALSE else ""


async def test_anti_affinity_keeps_web_off_the_db_host(client: Client, start_agent: StartAgent, image: str) -> None:
    hosts = [f"aff-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for host in hosts:
        await start_agent(node=host, hostname=host)
    async with scheduler(client):
        await client.projects.create(project("db", image=image, labels={"app": "db"}))
        db = await wait_phase(client, "db", v1.RUNNING, timeout=60)
        await client.projects.create(apart("web", image))
        web = await wait_phase(client, "web", v1.RUNNING, timeout=60)
        assert {db.status.node_ref, web.status.node_ref} == set(hosts)
        await client.projects.create(apart("web-2", image))
        message = await wait_for(lambda: reason(client, "web-2"), timeout=30)
        assert message == "0/2 nodes are available: 2 node(s) didn't match project anti-affinity."
