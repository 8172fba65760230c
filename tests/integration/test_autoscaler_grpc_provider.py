"""The gRPC provider against a real `NodeProvider` server (grpc.aio, on loopback, its own port): a scale-up asks
it for a node (IncreaseSize), which it registers; the projects gone, the idle node is removed (DeleteNodes); and
what it lists (ListNodes) that the cluster does not know is reported."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest
from cluster_sim import add_node, running_manager

from caravanserai import meta, v1
from caravanserai.api.v1 import autoscaling_pb2_grpc
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.autoscaler import app as autoscaler_app
from caravanserai.controllers.autoscaler.reconciler import AutoscalerConfig
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.errors import NotFound
from caravanserai.testing.builders import project
from caravanserai.testing.ports import free_port
from caravanserai.testing.wait import wait_for

CONFIG = AutoscalerConfig(scan_interval=0.2, new_node_grace=2.0, handoff_timeout=2.0, provider_list_interval=0.5)


class MachinePool(autoscaling_pb2_grpc.NodeProviderServicer):
    """A provider server: each machine asked for registers as a node (as its agent would); `stranger` is a machine
    it has that the cluster never heard of."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.machines: dict[str, str] = {"stranger": "Running"}
        self.asked: list[tuple[str, list[str], str]] = []  # (call, nodes, group)

    async def IncreaseSize(  # noqa: N802  # the generated servicer's method name
        self, request: v1.IncreaseSizeRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> v1.IncreaseSizeResponse:
        self.asked.append(("IncreaseSize", list(request.nodes), request.group))
        for name in request.nodes:
            if name not in self.machines:
                self.machines[name] = "Running"
                cpu = request.template.allocatable["cpu"]
                await add_node(self.client, name, cpu=cpu, labels={v1.LABEL_NODE_GROUP: request.group})
        return v1.IncreaseSizeResponse()

    async def DeleteNodes(  # noqa: N802  # the generated servicer's method name
        self, request: v1.DeleteNodesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> v1.DeleteNodesResponse:
        self.asked.append(("DeleteNodes", list(request.nodes), request.group))
        for name in request.nodes:
            self.machines.pop(name, None)
        return v1.DeleteNodesResponse()

    async def ListNodes(  # noqa: N802  # the generated servicer's method name
        self, request: v1.ListNodesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> v1.ListNodesResponse:
        nodes = [v1.ProviderNode(name=n, state=s) for n, s in sorted(self.machines.items())]
        return v1.ListNodesResponse(nodes=nodes)


@contextlib.asynccontextmanager
async def serving(pool: MachinePool) -> AsyncIterator[str]:
    server = grpc.aio.server()
    autoscaling_pb2_grpc.add_NodeProviderServicer_to_server(pool, server)
    address = f"127.0.0.1:{free_port()}"
    server.add_insecure_port(address)
    await server.start()
    try:
        yield address
    finally:
        await server.stop(grace=None)


def node_group(address: str) -> v1.NodeGroup:
    group = meta.with_type_meta(v1.NodeGroup())
    group.metadata.name = "cloud"
    group.spec.max_size = 3
    group.spec.template.allocatable.update({"cpu": "4", "memory": "8Gi"})
    group.spec.provider.grpc.address = address
    group.spec.provider.grpc.timeout = "5s"
    group.spec.scale_down.idle_time = "1s"
    return group


async def test_scale_up_and_down_through_a_real_grpc_provider(client: Client) -> None:
    await add_node(client, "small", cpu="500m")
    pool = MachinePool(client)
    clock = SystemClock()

    def setup(manager: Manager) -> autoscaler_app.Autoscaler:
        scheduler_app.setup(manager, client, clock)
        return autoscaler_app.setup(manager, client, clock, autoscaler_app.AutoscalerOptions(CONFIG))

    async with serving(pool) as address, running_manager(client, setup, clock=clock) as (_, parts):
        try:
            await client.nodegroups.create(node_group(address))
            for name in ("a", "b"):
                await client.projects.create(project(name, requests={"cpu": "2"}))
            await wait_for(lambda: [c for c, _, _ in pool.asked] == ["IncreaseSize"], timeout=30)
            (_, (node,), group) = pool.asked[0]
            assert group == "cloud"  # two projects of 2 cpu: one node of 4

            async def both_bound() -> bool:
                return all([(await client.projects.get(n)).status.node_ref == node for n in ("a", "b")])

            await wait_for(both_bound, timeout=30)

            async def stranger_reported() -> bool:
                found = meta.get_condition((await client.nodegroups.get("cloud")).status.conditions, "UnknownNodes")
                return found is not None and found.status == v1.TRUE and found.message.endswith("stranger")

            await wait_for(stranger_reported, timeout=20)
            for name in ("a", "b"):
                await client.projects.delete(name, force=True)

            async def scaled_down() -> bool:
                return list((await client.nodegroups.get("cloud")).status.last_scale_down.nodes) == [node]

            await wait_for(scaled_down, timeout=30)
            with pytest.raises(NotFound):
                await client.nodes.get(node)
            assert ("DeleteNodes", [node], "cloud") in pool.asked
            assert node not in pool.machines and "stranger" in pool.machines  # never deleted: not ours
            assert [c for c, _, _ in pool.asked].count("IncreaseSize") == 1
            status = (await client.nodegroups.get("cloud")).status
            assert (status.desired, status.current) == (0, 0)
        finally:
            await parts.reconciler.providers.grpc.close()
