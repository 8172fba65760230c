"""End-to-end fixtures: real Docker, real etcd, an in-process apiserver and in-process agents.

Every Docker object an agent of a test creates carries the label `caravanserai.io/node=<that test's node>`;
the `agents` fixture removes all of them after the test, whatever its outcome. Nothing is ever pulled: the
test image is built locally by `caravanserai.testing.ensure_test_image`.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from agent_harness import RunningAgent, StartAgent, remove_node_objects

from caravanserai import v1
from caravanserai.agent.agent import Agent
from caravanserai.agent.config import AgentConfig
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.routes import app as routes_app
from caravanserai.testing import ensure_test_image
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Skip the e2e tier when no Docker engine answers (scripts/start-dockerd.sh starts one)."""
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False).returncode != 0:
        pytest.skip("no Docker engine answers; run scripts/start-dockerd.sh")


@pytest.fixture(scope="session")
async def image(docker_engine: None) -> str:
    """The local busybox test image (built once, never pulled)."""
    return await asyncio.to_thread(ensure_test_image)


@pytest.fixture
async def api(etcd: EtcdServer) -> AsyncIterator[RunningApiServer]:
    async with apiserver(etcd.endpoint, bookmark_interval=0.2) as running:
        yield running


@pytest.fixture
async def client(api: RunningApiServer) -> AsyncIterator[Client]:
    async with Client(api.address, timeout=10, retry_timeout=10) as c:
        yield c


@pytest.fixture
async def route_controller(api: RunningApiServer) -> AsyncIterator[None]:
    """The routes controller of cara-controller-manager, which derives the Routes the agents' ingress reads."""
    async with Client(api.address, timeout=10, retry_timeout=10) as c:
        clock = SystemClock()
        manager = Manager(c, clock=clock, shutdown_timeout=5.0)
        routes_app.setup(manager, c, clock)
        async with running(manager):
            yield


@pytest.fixture
async def start_agent(api: RunningApiServer, image: str, route_controller: None) -> AsyncIterator[StartAgent]:
    """`await start_agent(node=…, **config overrides)`: start an agent and wait until its Node is Ready (the routes
    controller runs beside the agents, as cara-controller-manager does).

    After the test every agent is stopped and every Docker object of every node used is removed."""
    running: list[RunningAgent] = []
    nodes: set[str] = set()

    async def start(node: str | None = None, **overrides: Any) -> RunningAgent:
        name = node or f"e2e-{uuid.uuid4().hex[:8]}"
        nodes.add(name)
        base = AgentConfig(
            server=api.address,
            node_name=name,
            listen="127.0.0.1:0",
            heartbeat_interval=0.5,
            stop_timeout=1,
            pull_timeout=20,
            throughput_bytes=256 * 1024,
            resync_interval=30,
        )
        config = replace(base, **overrides)
        agent = Agent(config)
        task = asyncio.create_task(agent.run(), name=f"agent-{name}")
        handle = RunningAgent(agent, task, config)
        running.append(handle)
        async with Client(api.address, timeout=5, retry_timeout=5) as c:

            async def ready() -> bool:
                if task.done():
                    task.result()
                node_obj = await c.nodes.get(name)
                return node_obj.status.state == v1.NODE_READY and agent.synced.is_set()

            await wait_for(ready, timeout=20, message=f"agent {name} ready")
        return handle

    try:
        yield start
    finally:
        for handle in running:
            await handle.stop()
        for name in nodes:
            await asyncio.to_thread(remove_node_objects, name)
