"""The agent's /healthz is served without any flag, and its gRPC server offers health and reflection."""

from __future__ import annotations

import asyncio

import aiohttp
import grpc
from agent_harness import StartAgent
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from caravanserai.agent.__main__ import config_from_args, parser
from caravanserai.agent.config import DEFAULT_HEALTH_LISTEN


def test_cara_agent_serves_healthz_by_default() -> None:
    config = config_from_args(parser().parse_args(["--server", "127.0.0.1:7420", "--node-name", "n1"]))
    assert config.metrics_port is None
    assert config.health_listen == DEFAULT_HEALTH_LISTEN == "127.0.0.1:7422"


def reflected_services(address: str) -> list[str]:
    with grpc.insecure_channel(address) as channel:
        return sorted(ProtoReflectionDescriptorDatabase(channel).get_services())


async def test_agent_healthz_health_and_reflection_without_flags(start_agent: StartAgent) -> None:
    running = await start_agent()  # no metrics_port: the default configuration
    assert running.config.metrics_port is None
    port = running.agent.http_port
    assert port
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as response:
        assert response.status == 200
    address = f"127.0.0.1:{running.agent.port}"
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "caravanserai.v1.Agent"):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    listed = await asyncio.to_thread(reflected_services, address)
    assert listed == ["caravanserai.v1.Agent", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"]
