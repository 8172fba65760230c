"""Cohorts of ResourceQuotas through a real apiserver over real etcd (and the queue controller): borrowing up to a
limit, two apiservers racing for the cohort's last unit, fair sharing by weight, reclaim with two and three
namespaces. No scheduler runs: admitted projects stay Pending, which holds their share as a running one does."""

from __future__ import annotations

import asyncio

import pytest
from cluster_sim import running_manager

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.queue import app as queue_app
from caravanserai.errors import Conflict, Invalid
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for


def _quota(namespace: str, cpu: str, *, cohort: str = "pool", weight: str = "", borrow: str = "") -> v1.ResourceQuota:
    q = meta.with_type_meta(v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=namespace)))
    q.spec.hard["cpu"] = cpu
    q.spec.cohort = cohort
    q.spec.weight = weight
    if borrow:
        q.spec.borrowing_limit["cpu"] = borrow
    return q


def _in(namespace: str, name: str, cpu: str, priority: int = 0) -> v1.Project:
    return project(name, requests={"cpu": cpu}, priority=priority, namespace=namespace)


async def _team(client: Client, namespace: str, cpu: str, **options: str) -> None:
    await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=namespace)))
    await client.resource(v1.ResourceQuota).create(_quota(namespace, cpu, **options))


async def _status(client: Client, namespace: str) -> v1.ResourceQuotaStatus:
    return (await client.resource(v1.ResourceQuota).get(f"{namespace}/team")).status


async def _phase(client: Client, key: str) -> str:
    return (await client.projects.get(key)).status.phase


async def _message(client: Client, key: str) -> str:
    condition = meta.get_condition((await client.projects.get(key)).status.conditions, v1.CONDITION_PHASE)
    return condition.message if condition is not None else ""


async def test_a_namespace_borrows_unused_quota_of_its_cohort_up_to_its_limit(client: Client) -> None:
    await _team(client, "lend-a", "2", borrow="1")
    await _team(client, "lend-b", "2")
    assert (await client.projects.create(_in("lend-a", "big", "3"))).status.phase == v1.PENDING  # borrows 1
    status = await _status(client, "lend-a")
    assert (dict(status.used), dict(status.borrowed)) == ({"cpu": "3"}, {"cpu": "1"})
    held = await client.projects.create(_in("lend-a", "more", "500m"))
    assert held.status.phase == v1.QUEUED
    assert await _message(client, "lend-a/more") == "waiting for quota: team: 3 of 2 cpu used (may borrow 1), asks 500m"
    assert (await client.projects.create(_in("lend-b", "one", "1"))).status.phase == v1.PENDING
    assert (await client.projects.create(_in("lend-b", "two", "1"))).status.phase == v1.QUEUED  # 3 + 1 + 1 > 4
    assert await _message(client, "lend-b/two") == "waiting for quota: team: cohort pool: 4 of 4 cpu used, asks 1"
    await client.projects.delete("lend-a/big")
    assert dict((await _status(client, "lend-a")).borrowed) == {}
    for field, spec in (
        ("spec.borrowingLimit", v1.ResourceQuotaSpec(hard={"cpu": "1"}, borrowing_limit={"cpu": "1"})),  # no cohort
        ("spec.weight", v1.ResourceQuotaSpec(hard={"cpu": "1"}, cohort="pool", weight="-2")),
        ("spec.cohort", v1.ResourceQuotaSpec(hard={"cpu": "1"}, cohort="Not_A_Label")),
        ("spec.borrowingLimit", v1.ResourceQuotaSpec(hard={"cpu": "1"}, cohort="pool", borrowing_limit={"cpu": "-1"})),
    ):
        bad = v1.ResourceQuota(metadata=v1.ObjectMeta(name="bad", namespace="lend-b"), spec=spec)
        with pytest.raises(Invalid, match=field.replace(".", r"\.")):
            await client.resource(v1.ResourceQuota).create(bad)


async def test_two_apiservers_never_both_borrow_the_cohorts_last_unit(client: Client, second_api: Client) -> None:
    for namespace in ("race-a", "race-b"):
        await _team(client, namespace, "1")
        await client.projects.create(_in(namespace, "own", "1"))  # each at its own limit
    await _team(client, "race-idle", "0")

    async def attempt(c: Client, namespace: str, name: str) -> str:
        return (await c.projects.create(_in(namespace, name, "1"))).status.phase

    for round_ in range(1, 9):  # each round, the idle namespace lends one more unit: 4 creates race for it
        await _set_cpu(client, "race-idle", str(round_))
        phases = await asyncio.gather(
            attempt(client, "race-a", f"a{round_}"),
            attempt(second_api, "race-b", f"b{round_}"),
            attempt(second_api, "race-a", f"c{round_}"),
            attempt(client, "race-b", f"d{round_}"),
        )
        assert sorted(phases) == [v1.PENDING, v1.QUEUED, v1.QUEUED, v1.QUEUED], f"round {round_}"
    # From the final state: the cohort holds 10 of 10; the namespaces borrow the 8 units between them.
    pending = [
        p
        for ns in ("race-a", "race-b")
        for p in await client.projects.list(namespace=ns)
        if p.status.phase == v1.PENDING
    ]
    assert len(pending) == 10
    borrowed = [int((await _status(client, ns)).borrowed.get("cpu", "0")) for ns in ("race-a", "race-b")]
    assert sum(borrowed) == 8


async def test_fair_sharing_admits_the_namespace_with_the_lower_weighted_share(client: Client) -> None:
    await _team(client, "fair-a", "1")
    await _team(client, "fair-b", "1", weight="3")
    await _team(client, "fair-idle", "0")  # lends nothing yet
    for namespace in ("fair-a", "fair-b"):
        await client.projects.create(_in(namespace, "own", "1"))
    for i in range(4):  # queued while the idle namespace lends nothing
        for namespace in ("fair-a", "fair-b"):
            assert (await client.projects.create(_in(namespace, f"w{i}", "1"))).status.phase == v1.QUEUED
    async with running_manager(client, lambda manager: queue_app.setup(manager, client, SystemClock())):
        await _set_cpu(client, "fair-idle", "4")  # lends 4

        async def admitted() -> tuple[int, int]:
            counts = []
            for namespace in ("fair-a", "fair-b"):
                phases = [p.status.phase for p in await client.projects.list(namespace=namespace)]
                counts.append(phases.count(v1.PENDING) - 1)
            return counts[0], counts[1]

        # Of the 4 lent: shares after admission a 1/6, 2/6; b (weight 3) 1/18, 2/18, 3/18 (= a's 1/6: the older
        # wins), 4/18: b gets 3, a gets 1.
        async def shared() -> bool:
            return await admitted() == (1, 3)

        await wait_for(shared, 10, message="the lent quota shared by weight")
        await asyncio.sleep(0.3)
        assert await admitted() == (1, 3)
        assert await _message(client, "fair-a/w1") == (
            "waiting for quota: team: cohort pool: 6 of 6 cpu used, asks 1; 0 ahead in the queue"
        )


async def _set_cpu(client: Client, namespace: str, cpu: str) -> None:
    """Change the namespace's cpu limit as a user would: read, change, write; again on Conflict (the queue
    controller writes the quota's status meanwhile)."""
    quotas = client.resource(v1.ResourceQuota)
    while True:
        q = await quotas.get(f"{namespace}/team")
        q.spec.hard["cpu"] = cpu
        try:
            await quotas.update(q)
            return
        except Conflict:
            continue


async def test_reclaim_with_two_namespaces_gives_the_lender_its_quota_back(client: Client) -> None:
    await _team(client, "two-lender", "2")
    await _team(client, "two-borrower", "2")
    for i in range(4):  # 2 of its own, 2 borrowed
        assert (await client.projects.create(_in("two-borrower", f"b{i}", "1"))).status.phase == v1.PENDING
        await asyncio.sleep(0.01)  # distinct ages
    assert (await client.projects.create(_in("two-lender", "mine", "1", priority=1))).status.phase == v1.QUEUED
    async with running_manager(client, lambda manager: queue_app.setup(manager, client, SystemClock())):
        await wait_for(lambda: _is(client, "two-lender/mine", v1.PENDING), 10, message="the lender admitted")
    assert [await _phase(client, f"two-borrower/b{i}") for i in range(4)] == [v1.PENDING] * 3 + [v1.QUEUED]
    victim = await client.projects.get("two-borrower/b3")  # the newest of the lowest priority
    preempted = meta.get_condition(victim.status.conditions, v1.CONDITION_PREEMPTED)
    assert preempted is not None and preempted.reason == lifecycle.REASON_QUOTA_RECLAIMED
    assert "two-lender/mine" in preempted.message
    assert dict((await _status(client, "two-borrower")).borrowed) == {"cpu": "1"}
    assert dict((await _status(client, "two-lender")).used) == {"cpu": "1"}


async def test_reclaim_with_three_namespaces_spares_higher_priority_borrowers(client: Client) -> None:
    await _team(client, "tri-lender", "2")
    await _team(client, "tri-low", "2")
    await _team(client, "tri-high", "2")
    for namespace, priority in (("tri-low", 0), ("tri-high", 5)):
        for i in range(3):  # 2 of its own, 1 borrowed from the lender
            created = await client.projects.create(_in(namespace, f"p{i}", "1", priority=priority))
            assert created.status.phase == v1.PENDING
    for name in ("first", "second"):
        assert (await client.projects.create(_in("tri-lender", name, "1", priority=1))).status.phase == v1.QUEUED
        await asyncio.sleep(0.01)
    async with running_manager(client, lambda manager: queue_app.setup(manager, client, SystemClock())):
        await wait_for(lambda: _is(client, "tri-lender/first", v1.PENDING), 10, message="the lender admitted")
        await wait_for(
            lambda: _says(client, "tri-lender/second", "cohort pool: 6 of 6 cpu used"), 10, message="still waiting"
        )
        await asyncio.sleep(0.3)
        assert await _phase(client, "tri-lender/second") == v1.QUEUED  # only higher-priority borrowed work is left
    low = [await _phase(client, f"tri-low/p{i}") for i in range(3)]
    assert sorted(low) == [v1.PENDING, v1.PENDING, v1.QUEUED]
    assert [await _phase(client, f"tri-high/p{i}") for i in range(3)] == [v1.PENDING] * 3


async def _is(client: Client, key: str, phase: str) -> bool:
    return await _phase(client, key) == phase


async def _says(client: Client, key: str, text: str) -> bool:
    return text in await _message(client, key)
