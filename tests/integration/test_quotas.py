"""ResourceQuotas through a real apiserver over real etcd: usage counted in the same transaction as the write,
the last slot raced by 50 creates, Reject and Queue, a quota lowered below its use."""

from __future__ import annotations

import asyncio

import pytest
from cluster_sim import running_manager

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.queue import app as queue_app
from caravanserai.errors import FailedPrecondition, Forbidden, Invalid
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for


def _quota(namespace: str, policy: str = "", **hard: str) -> v1.ResourceQuota:
    q = meta.with_type_meta(v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=namespace)))
    q.spec.hard.update(hard)
    q.spec.policy = policy
    return q


def _in(namespace: str, name: str, **requests: str) -> v1.Project:
    p = project(name, requests=requests or None)
    p.metadata.namespace = namespace
    return p


async def _namespace(client: Client, name: str) -> None:
    await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=name)))


async def _used(client: Client, namespace: str) -> dict[str, str]:
    return dict((await client.resource(v1.ResourceQuota).get(f"{namespace}/team")).status.used)


async def test_usage_is_counted_with_every_write_and_reject_refuses(client: Client) -> None:
    await _namespace(client, "team-a")
    quotas = client.resource(v1.ResourceQuota)
    created = await quotas.create(_quota("team-a", "Reject", cpu="2", memory="1Gi", projects="3"))
    assert created.spec.policy == "Reject"
    await client.projects.create(_in("team-a", "a", cpu="1", memory="256Mi"))
    await client.projects.create(_in("team-a", "b", cpu="500m"))
    assert await _used(client, "team-a") == {"cpu": "1500m", "memory": "256Mi", "projects": "2"}
    with pytest.raises(Forbidden, match=r"exceeded quota in namespace team-a: team: 1500m of 2 cpu used, asks 1"):
        await client.projects.create(_in("team-a", "c", cpu="1"))
    await client.projects.delete("team-a/a")
    assert await _used(client, "team-a") == {"cpu": "500m", "memory": "0", "projects": "1"}
    b = await client.projects.get("team-a/b")
    b.spec.services[0].resources.requests["cpu"] = "3"
    with pytest.raises(FailedPrecondition, match="exceeds the quota of namespace team-a"):
        await client.projects.update(b)
    with pytest.raises(Invalid, match=r"spec\.policy"):
        await quotas.create(_quota("team-a", "Maybe", cpu="1"))


async def test_fifty_creates_race_for_the_last_slot(client: Client) -> None:
    await _namespace(client, "race-r")
    await _namespace(client, "race-q")
    await client.resource(v1.ResourceQuota).create(_quota("race-r", "Reject", projects="1"))
    await client.resource(v1.ResourceQuota).create(_quota("race-q", projects="1"))

    async def attempt(namespace: str, i: int) -> str:
        try:
            created = await client.projects.create(_in(namespace, f"p{i}"))
        except Forbidden:
            return "refused"
        return created.status.phase

    rejected = await asyncio.gather(*(attempt("race-r", i) for i in range(50)))
    assert sorted(set(rejected)) == ["Pending", "refused"] and rejected.count("Pending") == 1
    queued = await asyncio.gather(*(attempt("race-q", i) for i in range(50)))
    assert queued.count(v1.PENDING) == 1 and queued.count(v1.QUEUED) == 49
    # From the final state: exactly one project of each namespace holds the slot.
    for namespace in ("race-r", "race-q"):
        held = [p for p in await client.projects.list(namespace=namespace) if p.status.phase == v1.PENDING]
        assert len(held) == 1
        assert await _used(client, namespace) == {"projects": "1"}
    waiting = [p for p in await client.projects.list(namespace="race-q") if p.status.phase == v1.QUEUED]
    condition = meta.get_condition(waiting[0].status.conditions, v1.CONDITION_PHASE)
    assert condition is not None and condition.message == "waiting for quota: team: 1 of 1 projects used, asks 1"


async def test_a_quota_lowered_below_use_stops_only_new_work(client: Client) -> None:
    await _namespace(client, "team-l")
    quotas = client.resource(v1.ResourceQuota)
    await quotas.create(_quota("team-l", cpu="4"))
    for name in ("a", "b"):
        await client.projects.create(_in("team-l", name, cpu="1500m"))
    stored = await quotas.get("team-l/team")
    stored.spec.hard["cpu"] = "2"
    await quotas.update(stored)
    assert (await _used(client, "team-l"))["cpu"] == "3"  # over-use shows
    a = await client.projects.get("team-l/a")
    a.metadata.labels["still"] = "running"
    await client.projects.update(a)  # existing work is not touched
    late = await client.projects.create(_in("team-l", "c", cpu="100m"))
    assert late.status.phase == v1.QUEUED
    await client.projects.delete("team-l/a")
    assert (await _used(client, "team-l"))["cpu"] == "1500m"


async def _phase(client: Client, key: str) -> str:
    return (await client.projects.get(key)).status.phase


async def test_the_queue_admits_by_priority_then_age_and_says_why(client: Client) -> None:
    await _namespace(client, "team-q")
    await client.projects.create(_in("team-q", "early", cpu="1500m"))  # before any quota: counted by the recount
    await client.resource(v1.ResourceQuota).create(_quota("team-q", cpu="2"))

    async with running_manager(client, lambda manager: queue_app.setup(manager, client, SystemClock())):
        await wait_for(lambda: _used_cpu(client, "team-q", "1500m"), 10, message="the recount")
        for name, cpu, priority in (("big", "1", 0), ("later", "1500m", 0), ("urgent", "1500m", 10)):
            created = _in("team-q", name, cpu=cpu)
            created.spec.priority = priority
            assert (await client.projects.create(created)).status.phase == v1.QUEUED
            await asyncio.sleep(0.01)  # distinct ages

        async def says(key: str, message: str) -> bool:
            condition = meta.get_condition((await client.projects.get(key)).status.conditions, "Phase")
            return condition is not None and condition.message == message

        await wait_for(
            lambda: says(
                "team-q/later", "waiting for quota: team: 1500m of 2 cpu used, asks 1500m; 2 ahead in the queue"
            ),
            10,
            message="the reason it waits",
        )
        await client.projects.delete("team-q/early")
        await wait_for(lambda: _is(client, "team-q/urgent", v1.PENDING), 10, message="the highest priority first")
        assert [await _phase(client, f"team-q/{n}") for n in ("big", "later")] == [v1.QUEUED, v1.QUEUED]
        await wait_for(
            lambda: says("team-q/big", "waiting for quota: team: 1500m of 2 cpu used, asks 1; 0 ahead in the queue"),
            10,
            message="the queue moved up",
        )
        await client.projects.delete("team-q/urgent")
        await wait_for(lambda: _is(client, "team-q/big", v1.PENDING), 10, message="then the oldest")
        assert await _phase(client, "team-q/later") == v1.QUEUED  # 1 + 1.5 > 2: it waits
        assert await _used(client, "team-q") == {"cpu": "1"}


async def _is(client: Client, key: str, phase: str) -> bool:
    return await _phase(client, key) == phase


async def _used_cpu(client: Client, namespace: str, value: str) -> bool:
    return (await _used(client, namespace)).get("cpu") == value
