"""The autoscaler end to end with the `exec` provider starting real agents on the one Docker engine
(examples/autoscaling/local-node.sh): three projects that fit on no node → one node added → all Running; the
projects deleted → the node drained and removed after its (short) idle time."""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys
from collections.abc import AsyncIterator

import pytest
from agent_harness import StartAgent, remove_node_objects, wait_phase

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.autoscaler import app as autoscaler_app
from caravanserai.controllers.autoscaler.reconciler import AutoscalerConfig
from caravanserai.controllers.autoscaler.snapshot import is_unschedulable
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.errors import NotFound
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from caravanserai.testing.manager import running
from caravanserai.testing.wait import wait_for

pytestmark = pytest.mark.docker

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "examples" / "autoscaling" / "local-node.sh"


def widget_group(api: RunningApiServer, state: pathlib.Path) -> v1.NodeGroup:
    group = meta.with_type_meta(v1.NodeGroup())
    group.metadata.name = "widgets"
    spec = group.spec
    spec.min_size, spec.max_size = 0, 2
    spec.template.capacity["widget"] = "3"
    spec.template.labels["example.com/pool"] = "widgets"
    provider = spec.provider.exec
    provider.create.extend([str(SCRIPT), "create"])
    provider.delete.extend([str(SCRIPT), "delete"])
    provider.list.extend([str(SCRIPT), "list"])
    provider.timeout = "30s"
    provider.env.update(
        {
            "CARA_SERVER": api.address,
            "CARA_LOCAL_NODES": str(state),
            "CARA_AGENT": f"{sys.executable} -m caravanserai.agent",
            "CARA_AGENT_ARGS": "--heartbeat-interval 0.5 --stop-timeout 1 --log-level warning",
        }
    )
    spec.scale_down.idle_time = "3s"
    spec.register_timeout = "60s"
    return group


@pytest.fixture
async def node_state(tmp_path: pathlib.Path, api: RunningApiServer) -> AsyncIterator[pathlib.Path]:
    """The script's state directory; every agent it started is stopped (and its Docker objects removed) after."""
    yield tmp_path
    for pidfile in tmp_path.glob("*.pid"):
        env = {**os.environ, "CARA_LOCAL_NODES": str(tmp_path), "CARA_NODE_NAME": pidfile.stem}
        proc = await asyncio.create_subprocess_exec(str(SCRIPT), "delete", env=env)
        await proc.wait()
    for log in tmp_path.glob("*.log"):
        await asyncio.to_thread(remove_node_objects, log.stem)


async def test_exec_provider_adds_a_node_for_three_projects_and_removes_it_when_idle(
    client: Client, api: RunningApiServer, start_agent: StartAgent, image: str, node_state: pathlib.Path
) -> None:
    await start_agent()  # a node without widgets, in no group
    clock = SystemClock()
    manager = Manager(client, clock=clock, shutdown_timeout=5.0)
    scheduler_app.setup(manager, client, clock)
    config = AutoscalerConfig(scan_interval=0.5, new_node_grace=10.0, handoff_timeout=20.0)
    autoscaler_app.setup(manager, client, clock, autoscaler_app.AutoscalerOptions(config))
    async with running(manager):
        names = ["w-a", "w-b", "w-c"]
        for name in names:
            await client.projects.create(project(name, image=image, requests={"widget": "1"}))

        async def all_unschedulable() -> bool:
            return all([is_unschedulable(await client.projects.get(n)) for n in names])

        await wait_for(all_unschedulable, timeout=30, message="the projects found unschedulable")
        await client.nodegroups.create(widget_group(api, node_state))  # one decision for the three
        for name in names:
            await wait_phase(client, name, v1.RUNNING, timeout=60)
        placed = {(await client.projects.get(n)).status.node_ref for n in names}
        assert len(placed) == 1
        (new_node,) = placed
        node = await client.nodes.get(new_node)
        assert node.metadata.labels[v1.LABEL_NODE_GROUP] == "widgets"
        assert node.metadata.labels["example.com/pool"] == "widgets"
        group = await client.nodegroups.get("widgets")
        assert (group.status.last_scale_up.from_size, group.status.last_scale_up.to_size) == (0, 1)
        assert group.status.current == 1 and not group.status.provisioning
        events = [e for e in (await client.events.list()).items if e.spec.reason == "TriggeredScaleUp"]
        assert {e.spec.involved_object.name for e in events} == set(names)
        assert all(e.spec.message == "triggered scale-up of group widgets: 0 → 1" for e in events)

        for name in names:
            await client.projects.delete(name)

        async def removed() -> bool:
            try:
                await client.nodes.get(new_node)
                return False
            except NotFound:
                pass
            current = await client.nodegroups.get("widgets")
            return current.status.last_scale_down.to_size == 0 and current.status.current == 0

        await wait_for(removed, timeout=60, message="the idle node removed")
        assert not (node_state / f"{new_node}.pid").exists()
