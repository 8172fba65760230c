"""The WebFarm example operator (examples/webfarm) as a separate process, with the scheduler, two real
agents and real Docker: 3 replicas Running, spread over both nodes by the example template's spread constraint, a
deleted one replaced, scaled to 1, the set deleted → all gone (its projects through their owner references, by the
garbage collector)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from agent_harness import StartAgent
from google.protobuf import json_format

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.errors import Invalid, NotFound
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.wait import wait_for
from support.customkinds import define_webfarm, webfarm, webfarm_messages

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "webfarm"
OPERATOR = EXAMPLE / "webfarm_controller.py"


def example_spread(obj: Any) -> Any:
    """`obj` with the spread constraints of the example's template (examples/webfarm/web-farm.yaml)."""
    template = yaml.safe_load((EXAMPLE / "web-farm.yaml").read_text())["spec"]["template"]["spec"]
    for constraint in template["topologySpreadConstraints"]:
        json_format.ParseDict(constraint, obj.spec.template.spec.topology_spread_constraints.add())
    obj.spec.template.spec.topology_spread_constraints[0].label_selector.match_labels.clear()
    obj.spec.template.spec.topology_spread_constraints[0].label_selector.match_labels["set"] = obj.metadata.name
    return obj


@contextlib.asynccontextmanager
async def scheduler(client: Client) -> AsyncIterator[None]:
    """The scheduler and the garbage collector (which deletes a deleted set's projects)."""
    manager = Manager(client, clock=SystemClock(), shutdown_timeout=5.0)
    scheduler_app.setup(manager, client, SystemClock())
    gc_app.setup(manager, client, SystemClock(), gc_app.GCOptions())
    task = asyncio.create_task(manager.run(), name="e2e-scheduler")
    try:
        yield
    finally:
        manager.stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


@contextlib.asynccontextmanager
async def operator(api: RunningApiServer) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(OPERATOR),
        "--server",
        api.address,
        "--leader-elect",
        "--metrics-port",
        "0",
        "--log-level",
        "warning",
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _projects(client: Client, name: str) -> dict[str, v1.Project]:
    listed = await client.projects.list()
    return {p.metadata.name: p for p in listed.items if _controlled_by(p, name)}


def _uid() -> str:
    return uuid.uuid4().hex[:6]


def _controlled_by(project: v1.Project, name: str) -> bool:
    ref = meta.controller_of(project)
    return ref is not None and (ref.kind, ref.name) == ("WebFarm", name)


def _ready(obj: Any) -> str:
    cond = meta.get_condition(obj.status.conditions, "Ready")
    return cond.status if cond is not None else ""


async def test_webfarm_operator_keeps_scales_and_cleans_up(
    api: RunningApiServer, client: Client, start_agent: StartAgent
) -> None:
    # Each agent its own host name: the spread constraint's topology key is caravanserai.io/hostname.
    agents = {(await start_agent(node=name, hostname=name)).node for name in (f"ps-a-{_uid()}", f"ps-b-{_uid()}")}
    await define_webfarm(client)  # the deployment installs the definition; the operator only registers
    sets = client.resource(webfarm_messages().WebFarm)
    async with scheduler(client), operator(api) as proc:

        async def served() -> bool:
            assert proc.returncode is None, "the operator exited"
            try:
                await sets.list()
            except Invalid:  # unknown resource until the apiserver serves the definition
                return False
            return True

        await wait_for(served, timeout=30, message="webfarms served")
        await sets.create(example_spread(webfarm("web", replicas=3)))

        async def all_running() -> bool:
            found = await _projects(client, "web")
            obj = await sets.get("web")
            running = sorted(n for n, p in found.items() if p.status.phase == v1.RUNNING)
            return running == ["web-0", "web-1", "web-2"] and obj.status.ready_replicas == 3 and _ready(obj) == v1.TRUE

        await wait_for(all_running, timeout=90, message="3 replicas Running and the set Ready")
        nodes = {p.status.node_ref for p in (await _projects(client, "web")).values()}
        assert nodes == agents, f"the spread constraint puts replicas on both agents' nodes, got {nodes}"

        old_uid = (await client.projects.get("web-1")).metadata.uid
        await client.projects.delete("web-1")

        async def replaced() -> bool:
            try:
                p = await client.projects.get("web-1")
            except NotFound:
                return False
            return p.metadata.uid != old_uid and p.status.phase == v1.RUNNING

        await wait_for(replaced, timeout=90, message="web-1 replaced and Running")

        def one_replica(obj: Any) -> bool:
            obj.spec.replicas = 1
            return True

        await modify(sets, "web", one_replica)  # the operator writes the set's status meanwhile

        async def scaled_down() -> bool:
            found = await _projects(client, "web")
            current = await sets.get("web")
            return list(found) == ["web-0"] and current.status.replicas == 1 and _ready(current) == v1.TRUE

        await wait_for(scaled_down, timeout=90, message="scaled to one replica")

        await sets.delete("web")

        async def all_gone() -> bool:
            try:
                await sets.get("web")
                return False
            except NotFound:
                return not await _projects(client, "web")

        await wait_for(all_gone, timeout=90, message="the set and its projects gone")
