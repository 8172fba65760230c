"""An agent under mutual TLS with a node identity, beside the routes controller under a controller identity: its
ingress serves from Routes (it may read no other node's project), serves the old copy of a project handed over to
another node until the hand-off ends, and removes the containers of a project moved away (reading it is then
refused: Forbidden counts as "not mine any more")."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
import time
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from agent_harness import NODE_LABEL, bind, docker_list, remove_node_objects, wait_phase

from caravanserai import v1
from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.routes import app as routes_app
from caravanserai.errors import Forbidden
from caravanserai.process.tls import TLSFiles
from caravanserai.project import lifecycle
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.builders import node as node_object
from caravanserai.testing.builders import project
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVE = "echo moved-or-not > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"


def tls(certs: pathlib.Path, identity: str) -> TLSFiles:
    name = identity.replace(":", "-")
    return TLSFiles(cert=str(certs / f"{name}.crt"), key=str(certs / f"{name}.key"), ca=str(certs / "ca.crt"))


def web(name: str, image: str) -> v1.Project:
    p = project(name, image=image, services=["web"], command=["sh", "-c", SERVE])
    ingress = p.spec.ingress.add(name="site", host="web")
    ingress.target.service, ingress.target.port = "web", 8080
    return p


@contextlib.asynccontextmanager
async def agent_of(api: str, node: str, certs: pathlib.Path) -> AsyncIterator[Agent]:
    config = AgentConfig(
        server=api,
        node_name=node,
        tls=tls(certs, f"node:{node}"),
        listen="127.0.0.1:0",
        heartbeat_interval=0.5,
        stop_timeout=1,
        throughput_bytes=64 * 1024,
    )
    agent = Agent(config)
    task = asyncio.create_task(agent.run())
    try:
        yield agent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.to_thread(remove_node_objects, node)


async def status_of(agent: Agent, host: str) -> int:
    url = f"http://127.0.0.1:{agent.ingress_port}/index.html"
    async with aiohttp.ClientSession() as session, session.get(url, headers={"Host": host}) as response:
        return response.status


def containers(node: str, name: str) -> list[str]:
    return [c for c in docker_list("container", f"{NODE_LABEL}={node}") if f"_{name}_" in f"_{c}_"]


async def move_away(admin: Client, name: str, to: str, *, handoff: float | None) -> None:
    """Move project `name` off its node (with a hand-off of `handoff` seconds, or none) and bind it to `to`."""
    p = await admin.projects.get(name)
    now = time.time()
    until = now + handoff if handoff is not None else None
    moved = lifecycle.return_to_pending(p, reason="Drained", message="by the test", now=now, handoff_until=until)
    await admin.projects.update_status(moved)
    await bind(admin, name, to)


async def test_an_agent_with_a_node_identity_routes_hands_off_and_cleans_up(
    etcd: EtcdServer, image: str, tmp_path: pathlib.Path
) -> None:
    node = f"e2e-{uuid.uuid4().hex[:8]}"
    identities = ["apiserver", "admin", f"node:{node}", "controller:manager"]
    subprocess.run([str(ROOT / "deploy" / "certs.sh"), str(tmp_path), *identities], check=True, capture_output=True)
    clock = SystemClock()
    async with (
        apiserver(etcd.endpoint, tls=tls(tmp_path, "apiserver")) as api,
        Client(api.address, tls=tls(tmp_path, "admin"), timeout=10, retry_timeout=10) as admin,
        Client(api.address, tls=tls(tmp_path, "controller:manager"), timeout=10, retry_timeout=10) as controllers,
        Client(api.address, tls=tls(tmp_path, f"node:{node}"), timeout=10, retry_timeout=1) as as_node,
    ):
        manager = Manager(controllers, clock=clock, shutdown_timeout=5.0)
        routes_app.setup(manager, controllers, clock)
        await admin.nodes.create(node_object("elsewhere"))  # where the projects move (no agent runs there)
        async with running(manager), agent_of(api.address, node, tmp_path) as agent:
            await wait_for(lambda: agent.synced.is_set() and agent.ingress_port, 20, message="the agent to start")
            for name in ("handed", "dropped"):
                await admin.projects.create(web(name, image))
                await bind(admin, name, node)
                await wait_phase(admin, name, v1.RUNNING)
                await wait_for(lambda h=f"web.{name}.local": _answers(agent, h, 200), 5, message=f"{name} served")

            # A hand-off: the old copy here keeps serving (the Route names this node as the previous one) and
            # the agent may still read the project; its containers go once the deadline passes.
            await move_away(admin, "handed", "elsewhere", handoff=4.0)
            await wait_for(lambda: _previous_is(admin, "handed", node), 5, message="the Route to name the hand-off")
            assert await status_of(agent, "web.handed.local") == 200
            assert (await as_node.projects.get("handed")).status.previous_node_ref == node
            assert containers(node, "handed")

            # Moved away without a hand-off: reading it is refused, and the agent removes its copy all the same.
            await move_away(admin, "dropped", "elsewhere", handoff=None)
            with pytest.raises(Forbidden):
                await as_node.projects.get("dropped")
            await wait_for(lambda: not containers(node, "dropped"), 15, message="the dropped copy to be removed")
            await wait_for(lambda: not containers(node, "handed"), 15, message="the hand-off to end here")
            assert [p.metadata.name for p in (await as_node.projects.list()).items] == ["handed"]  # until run


async def _answers(agent: Agent, host: str, status: int) -> bool:
    return await status_of(agent, host) == status


async def _previous_is(admin: Client, name: str, node: str) -> bool:
    route = await admin.resource(v1.Route).get(name)
    return route.spec.previous_node.node == node and route.spec.node.node == "elsewhere"
