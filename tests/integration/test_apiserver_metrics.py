"""The apiserver's observability: Prometheus metrics checked against known traffic, /healthz and /readyz, gRPC
server reflection and health. Several apiservers run in this one process, each with its own counts."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from prometheus_client.parser import text_string_to_metric_families

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.errors import ApiError, NotFound, ResourceExhausted
from caravanserai.testing import EtcdServer
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(api: RunningApiServer, path: str = "/metrics") -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{api.server.metrics_port}{path}") as response,
    ):
        return response.status, await response.text()


async def samples(api: RunningApiServer) -> Samples:
    """Every sample of /metrics, parsed by prometheus_client's own text parser."""
    status, text = await scrape(api)
    assert status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(all_samples: Samples, name: str, **labels: str) -> float:
    return all_samples.get((name, frozenset(labels.items())), 0.0)


def requests(all_samples: Samples, verb: str, code: str = "OK", resource: str = "projects") -> float:
    return value(all_samples, "caravanserai_apiserver_requests_total", verb=verb, resource=resource, code=code)


@pytest.fixture
async def api(etcd: EtcdServer) -> Mapping[str, RunningApiServer]:
    async with (
        apiserver(etcd.endpoint, metrics_listen="127.0.0.1:0") as first,
        apiserver(etcd.endpoint, metrics_listen="127.0.0.1:0") as second,
    ):
        yield {"first": first, "second": second}


async def test_metrics_count_known_traffic_per_server(api: Mapping[str, RunningApiServer]) -> None:
    first, second = api["first"], api["second"]
    async with Client(first.address) as c, Client(second.address) as other:
        # An apiserver's own creates at start (the default namespace, the built-in roles) come before the traffic.
        creates_at_start = value(
            await samples(first), "caravanserai_apiserver_etcd_request_duration_seconds_count", operation="create"
        )
        for name in ("m-a", "m-b", "m-c"):
            await c.projects.create(project(name))
        await c.projects.get("m-a")
        await c.projects.get("m-b")
        with pytest.raises(NotFound):
            await c.projects.get("m-missing")
        await c.projects.list()
        await other.projects.create(project("m-other"))  # the second server, its own prefix and registry
        stream = c.projects.watch(resource_version="0")
        first_event = await anext(stream)
        assert first_event.type == v1.ADDED
        try:

            async def caches_caught_up() -> bool:
                mine, theirs = await samples(first), await samples(second)
                return (
                    value(mine, "caravanserai_apiserver_objects", resource="projects") == 3
                    and value(theirs, "caravanserai_apiserver_objects", resource="projects") == 1
                )

            await wait_for(caches_caught_up, 5, message="both watch caches hold the projects written")
            s = await samples(first)
            assert requests(s, "Create") == 3
            assert requests(s, "Get") == 2
            assert requests(s, "Get", "NOT_FOUND") == 1
            assert requests(s, "List") == 1
            assert (
                value(
                    s,
                    "caravanserai_apiserver_request_duration_seconds_count",
                    verb="Create",
                    resource="projects",
                    code="OK",
                )
                == 3
            )
            assert value(s, "caravanserai_apiserver_watchers", resource="projects") == 1
            assert value(s, "caravanserai_apiserver_objects", resource="projects") == 3
            assert value(s, "caravanserai_apiserver_objects", resource="nodes") == 0
            creates = value(s, "caravanserai_apiserver_etcd_request_duration_seconds_count", operation="create")
            assert creates - creates_at_start == 3
            assert value(s, "caravanserai_apiserver_etcd_request_duration_seconds_count", operation="get") >= 2
            assert value(s, "caravanserai_apiserver_inflight_requests") == 0
            assert value(s, "caravanserai_apiserver_refused_requests_total") == 0
            assert value(s, "caravanserai_apiserver_watch_cache_revision", resource="projects") > 0
            other_samples = await samples(second)
            assert requests(other_samples, "Create") == 1
            assert value(other_samples, "caravanserai_apiserver_objects", resource="projects") == 1
        finally:
            await stream.aclose()

        async def lag_settles_and_watch_is_counted() -> bool:
            s = await samples(first)
            return (
                value(s, "caravanserai_apiserver_watch_cache_lag_seconds", resource="projects") == 0
                and value(s, "caravanserai_apiserver_watchers", resource="projects") == 0
                and requests(s, "Watch", "CANCELLED") + requests(s, "Watch") == 1
            )

        await wait_for(lag_settles_and_watch_is_counted, 5, message="watch ended, cache caught up")


async def test_healthz_readyz_and_grpc_health(api: Mapping[str, RunningApiServer]) -> None:
    first = api["first"]
    assert await scrape(first, "/healthz") == (200, "ok\n")
    assert await scrape(first, "/readyz") == (200, "ok\n")
    async with grpc.aio.insecure_channel(first.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "caravanserai.v1.Resources"):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def reflected_services(address: str) -> list[str]:
    """What a generic reflection client (as grpcurl's `list`) sees."""
    with grpc.insecure_channel(address) as channel:
        return sorted(ProtoReflectionDescriptorDatabase(channel).get_services())


async def test_reflection_lists_our_services(api: Mapping[str, RunningApiServer]) -> None:
    listed = await asyncio.to_thread(reflected_services, api["first"].address)
    assert listed == [
        "caravanserai.v1.Network",
        "caravanserai.v1.Resources",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    ]


async def test_refused_requests_are_counted(etcd: EtcdServer) -> None:
    async with apiserver(etcd.endpoint, metrics_listen="127.0.0.1:0", max_inflight=0) as api:
        async with Client(api.address, retry_timeout=0) as c:
            for _ in range(2):
                with pytest.raises(ResourceExhausted):
                    await c.projects.get("anything")
        s = await samples(api)
        assert value(s, "caravanserai_apiserver_refused_requests_total") == 2
        assert requests(s, "Get", "RESOURCE_EXHAUSTED") == 2


async def test_metrics_off_and_non_loopback_refused(etcd: EtcdServer) -> None:
    async with apiserver(etcd.endpoint, metrics_listen="off") as api:
        assert api.server.metrics_port == 0
    with pytest.raises(ValueError, match=r"refusing plain HTTP metrics on 0.0.0.0:0"):
        async with apiserver(etcd.endpoint, metrics_listen="0.0.0.0:0"):
            pass


async def test_writes_kept_for_the_lag_gauge_are_forgotten_once_applied_without_a_scrape(etcd: EtcdServer) -> None:
    async with apiserver(etcd.endpoint) as api, Client(api.address) as client:
        obj = await client.projects.create(project("lag"))
        for i in range(50):
            obj.metadata.annotations["i"] = str(i)
            obj = await client.projects.update(obj)
            written = int(obj.metadata.resource_version)
            await wait_for(lambda w=written: api.server.service.cache("projects").revision >= w)  # type: ignore[union-attr, misc]  # started: service is set; the lambda's default binds the version
        remembered = api.server.metrics._writes["projects"]  # noqa: SLF001
        assert len(remembered) <= 1  # only the write in flight, never the 51 done (nothing scraped /metrics)


async def test_requests_for_resources_not_served_share_one_label(api: Mapping[str, RunningApiServer]) -> None:
    first = api["first"]
    async with Client(first.address, retry_timeout=0) as c:
        for i in range(20):
            with pytest.raises(ApiError):
                await c.call(c.stub.Get, v1.GetRequest(resource=f"made-up-{i}", name="x"), retry=False)
        await c.projects.list()
    s = await samples(first)
    resources = {dict(labels).get("resource") for name, labels in s if name == "caravanserai_apiserver_requests_total"}
    assert not any(r and r.startswith("made-up") for r in resources)
    assert (
        sum(
            v
            for (name, labels), v in s.items()
            if name == "caravanserai_apiserver_requests_total" and dict(labels).get("resource") == "unknown"
        )
        == 20
    )
    assert requests(s, "List") == 1
