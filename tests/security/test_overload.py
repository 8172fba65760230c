"""A client flood gets RESOURCE_EXHAUSTED with retry advice; other clients keep being served."""

from __future__ import annotations

import asyncio

import grpc

from caravanserai import v1
from caravanserai.api.v1 import api_pb2_grpc
from caravanserai.client import Client
from caravanserai.errors import ResourceExhausted
from caravanserai.grpcstatus import from_rpc_error
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.builders import project

FLOOD = 400
"""Requests of one flood, all sent at once on one channel."""
ROUNDS = 5
"""Floods at most: each List waits for etcd, yet on a fast machine the server may finish every request before it
has started the next few, so a flood is repeated (bounded) until the cap has been reached at least once."""


async def test_flood_is_refused_and_others_are_served(etcd) -> None:  # type: ignore[no-untyped-def]  # the etcd fixture is left unannotated
    async with apiserver(etcd.endpoint, max_inflight=200, max_inflight_per_client=2) as api:
        async with Client(api.address) as setup:
            await setup.projects.create(project("target"))
        channel = grpc.aio.insecure_channel(api.address)
        stub = api_pb2_grpc.ResourcesStub(channel)
        outcomes: list[str] = []
        retry_advice: list[float | None] = []

        async def flood_one() -> None:
            try:
                await stub.List(v1.ListRequest(resource="projects"), timeout=10)
                outcomes.append("ok")
            except grpc.aio.AioRpcError as exc:
                err = from_rpc_error(exc)
                outcomes.append(type(err).__name__)
                if isinstance(err, ResourceExhausted):
                    retry_advice.append(err.retry_after)

        served: list[v1.Project] = []
        async with Client(api.address) as other:
            for _ in range(ROUNDS):
                flood = asyncio.gather(*(flood_one() for _ in range(FLOOD)))
                served += [await other.projects.get("target") for _ in range(20)]  # within its own share
                await flood
                if "ResourceExhausted" in outcomes:
                    break
        await channel.close()
        assert len(served) >= 20 and all(p.metadata.name == "target" for p in served)
        assert outcomes.count("ResourceExhausted") > 0, outcomes
        assert set(outcomes) <= {"ok", "ResourceExhausted"}
        assert retry_advice and all(a == 1.0 for a in retry_advice)
        assert api.server.limiter.refused == outcomes.count("ResourceExhausted")
