"""What an apiserver keeps of quotas between project writes (`apiserver.kinds.quotabook`), through real apiservers
over real etcd: its own writes read nothing, and a quota created, lowered or joining a cohort through another
apiserver counts at the very next write, whatever the first one kept; a namespace joins a cohort through one quota."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.errors import Invalid
from caravanserai.storage import EtcdClient
from caravanserai.testing.builders import project


def _quota(namespace: str, *, cohort: str = "", **hard: str) -> v1.ResourceQuota:
    q = meta.with_type_meta(v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=namespace)))
    q.spec.hard.update(hard)
    q.spec.cohort = cohort
    return q


async def _create(client: Client, namespace: str, name: str, cpu: str = "100m") -> str:
    created = await client.projects.create(project(name, requests={"cpu": cpu}, namespace=namespace))
    return str(created.status.phase)


async def _namespaces(client: Client, *names: str) -> None:
    for name in names:
        await client.namespaces.create(v1.Namespace(metadata=v1.ObjectMeta(name=name)))


async def test_writes_that_follow_each_other_read_the_quotas_once(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _namespaces(client, "book-a")
    await client.resource(v1.ResourceQuota).create(_quota("book-a", cpu="100", projects="50"))
    reads: list[bytes] = []
    plain_range = EtcdClient.range

    async def counted(self: EtcdClient, key: bytes, *args: Any, **kwargs: Any) -> Any:
        if b"/resourcequotas/" in key:
            reads.append(key.rpartition(b"/resourcequotas/")[2])
        return await plain_range(self, key, *args, **kwargs)

    monkeypatch.setattr(EtcdClient, "range", counted)
    for i in range(20):
        assert await _create(client, "book-a", f"p{i}") == v1.PENDING
    await client.projects.delete("book-a/p0")
    assert reads == [b"book-a/"]  # the first write read the namespace's quotas; the others and the delete nothing
    used = (await client.resource(v1.ResourceQuota).get("book-a/team")).status.used
    assert dict(used) == {"cpu": "1900m", "projects": "19"}


async def test_a_quota_created_or_lowered_through_another_apiserver_counts_at_the_next_write(
    client: Client, second_api: Client
) -> None:
    await _namespaces(client, "book-late")
    assert await _create(client, "book-late", "before") == v1.PENDING  # this apiserver now keeps "no quotas"
    quotas = second_api.resource(v1.ResourceQuota)
    await quotas.create(_quota("book-late", projects="1"))  # created with nothing used ("before" predates it)
    assert await _create(client, "book-late", "first") == v1.PENDING
    assert await _create(client, "book-late", "second") == v1.QUEUED
    await _set_projects(quotas, "book-late", "3")  # what this apiserver kept says full: it reads again first
    assert await _create(client, "book-late", "third") == v1.PENDING
    await _set_projects(quotas, "book-late", "1")
    await client.projects.delete("book-late/third")  # released against the quota as it is now
    assert dict((await quotas.get("book-late/team")).status.used) == {"projects": "1"}
    assert await _create(client, "book-late", "fourth") == v1.QUEUED


async def _set_projects(quotas: Any, namespace: str, value: str) -> None:
    q = await quotas.get(f"{namespace}/team")
    q.spec.hard["projects"] = value
    await quotas.update(q)


async def test_a_member_joining_the_cohort_through_another_apiserver_is_judged_at_the_next_admission(
    client: Client, second_api: Client
) -> None:
    await _namespaces(client, "join-a", "join-b")
    await client.resource(v1.ResourceQuota).create(_quota("join-a", cohort="join", cpu="2"))
    assert await _create(client, "join-a", "warm", "500m") == v1.PENDING  # this apiserver keeps cohort "join"
    quotas = second_api.resource(v1.ResourceQuota)
    await quotas.create(_quota("join-b", cpu="2"))
    assert await _create(second_api, "join-b", "heavy", "2") == v1.PENDING
    over = await quotas.get("join-b/team")
    over.spec.hard["cpu"] = "0"  # join-b now uses 2 of 0 ...
    over.spec.cohort = "join"  # ... and joins the cohort: its total is 2 cpu, 2.5 used
    await quotas.update(over)
    assert await _create(client, "join-a", "next", "500m") == v1.QUEUED
    held = await client.projects.get("join-a/next")
    condition = meta.get_condition(held.status.conditions, v1.CONDITION_PHASE)
    assert condition is not None and "cohort join: 2500m of 2 cpu used" in condition.message


async def test_a_namespace_joins_a_cohort_through_one_quota_even_when_two_apiservers_race(
    client: Client, second_api: Client
) -> None:
    await _namespaces(client, "one-a", "one-b")
    await client.resource(v1.ResourceQuota).create(_quota("one-a", cohort="once", cpu="2"))
    second = _quota("one-a", cohort="once", cpu="1")
    second.metadata.name = "extra"
    with pytest.raises(Invalid, match=r"spec\.cohort: namespace one-a already takes part in cohort once through quota"):
        await client.resource(v1.ResourceQuota).create(second)
    second.spec.cohort = ""
    created = await client.resource(v1.ResourceQuota).create(second)  # outside the cohort it may exist
    created.spec.cohort = "once"
    with pytest.raises(Invalid, match=r"spec\.cohort"):
        await client.resource(v1.ResourceQuota).update(created)  # and may not join it later
    for round_ in range(5):  # two quotas of one-b join the same cohort at once, each through its own apiserver

        async def join(c: Client, name: str, cohort: str) -> bool:
            q = _quota("one-b", cohort=cohort, cpu="1")
            q.metadata.name = name
            try:
                await c.resource(v1.ResourceQuota).create(q)
            except Invalid:
                return False
            return True

        cohort = f"race-{round_}"
        results = await asyncio.gather(join(client, f"x{round_}", cohort), join(second_api, f"y{round_}", cohort))
        assert sorted(results) == [False, True], f"round {round_}"
