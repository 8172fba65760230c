"""A stopping apiserver hands its clients over: a client given several apiservers watches their gRPC health, so
while one says NOT_SERVING during its `shutdown_delay` every new call goes to the others, and creates (which a
client cannot repeat safely) never fail for the stop."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from caravanserai.apiserver.server import ApiServer
from caravanserai.client import Client
from caravanserai.testing import builders
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.wait import wait_for

DELAY = 2.0


def creates_served(server: ApiServer) -> float:
    """How many creates of projects `server` answered."""
    return sum(
        sample.value
        for family in server.metrics.registry.collect()
        if family.name == "caravanserai_apiserver_requests"
        for sample in family.samples
        if sample.name.endswith("_total")
        and sample.labels["verb"].lower() == "create"
        and sample.labels["resource"] == "projects"
    )


async def not_serving(api: RunningApiServer) -> bool:
    async with grpc.aio.insecure_channel(api.address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
    return reply.status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_a_stopping_apiserver_gets_no_new_calls_and_no_create_fails(etcd: EtcdServer) -> None:
    async with (
        apiserver(etcd.endpoint, prefix="/handover", shutdown_delay=DELAY) as leaving,
        apiserver(etcd.endpoint, prefix="/handover") as staying,
        Client(f"{leaving.address},{staying.address}", timeout=10, retry_timeout=0) as client,
    ):
        for i in range(20):  # round robin: both take some
            await client.projects.create(builders.project(f"before-{i}"))
        assert creates_served(leaving.server) > 0 and creates_served(staying.server) > 0

        stopping = asyncio.create_task(leaving.stop())
        await wait_for(lambda: not_serving(leaving), 5, message="the stopping apiserver says NOT_SERVING")
        await asyncio.sleep(0.2)  # the client's health watch has heard it
        served_before = creates_served(leaving.server)
        for i in range(20):  # retry_timeout=0: any failure reaches this test
            await client.projects.create(builders.project(f"during-{i}"))
        assert creates_served(leaving.server) == served_before
        assert not stopping.done(), "the apiserver serves on during its shutdown delay"
        await stopping
        for i in range(5):
            await client.projects.create(builders.project(f"after-{i}"))
        assert len(await client.projects.list()) == 45
