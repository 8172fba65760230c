"""The WebFarm operator (examples/webfarm) on the FakeClient: no server and no hand-written fake. The level
handler creates, replaces, updates and scales the set's projects, owned by reference, and counts them into the
status; the fake's garbage collector deletes them with the set."""

from __future__ import annotations

from typing import Any

import pytest

from caravanserai import meta, v1
from caravanserai.controller import Result
from caravanserai.errors import NotFound
from caravanserai.operator import Operator
from caravanserai.testing import FakeClient, FakeClock
from support.customkinds import GROUP, webfarm, webfarm_messages
from support.examples import webfarm_operator

ps = webfarm_operator()
m = webfarm_messages()
ON_DELETE = 1  # UpdatePolicy.ON_DELETE


@pytest.fixture
async def op(fake_client: FakeClient, fake_clock: FakeClock) -> Operator[Any]:
    await fake_client.define(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group=GROUP)
    operator: Operator[Any] = ps.operator(fake_client, clock=fake_clock)
    return operator


async def owned(client: FakeClient, owner: Any) -> dict[str, v1.Project]:
    listed = await client.projects.list()
    return {p.metadata.name: p for p in listed.items if meta.is_owned_by(p, owner)}


async def messages(client: FakeClient) -> list[str]:
    return sorted(e.spec.message for e in (await client.events.list()).items)


async def set_phase(client: FakeClient, name: str, phase: str) -> None:
    project = await client.projects.get(name)
    project.status.phase = phase
    await client.projects.update_status(project)


def ready(obj: Any) -> tuple[str, str]:
    cond = meta.get_condition(obj.status.conditions, "Ready")
    assert cond is not None
    return cond.status, cond.message


async def test_replicas_are_created_owned_and_counted(op: Operator[Any], fake_client: FakeClient) -> None:
    sets = fake_client.resource(m.WebFarm)
    web = webfarm("web", replicas=3)
    web.spec.template.labels["tier"] = "front"
    created = await sets.create(web)
    assert await op.reconcile("web") == Result()
    projects = await owned(fake_client, created)
    assert sorted(projects) == ["web-0", "web-1", "web-2"]
    assert dict(projects["web-1"].metadata.labels) == {"tier": "front", "set": "web"}
    assert meta.controller_of(projects["web-1"]).uid == created.metadata.uid
    assert await messages(fake_client) == [f"created project web-{i}" for i in range(3)]
    await op.reconcile("web")  # the projects' events bring the set back
    obj = await sets.get("web")
    assert (obj.status.replicas, obj.status.ready_replicas, obj.status.observed_generation) == (3, 0, 1)
    assert ready(obj) == (v1.FALSE, "0/3 projects Running")
    assert not obj.metadata.finalizers  # owned by reference, not by label plus finalizer
    assert not obj.metadata.annotations  # a level handler only: no handled state recorded

    for i in range(3):
        await set_phase(fake_client, f"web-{i}", v1.RUNNING)
    await op.reconcile("web")
    obj = await sets.get("web")
    assert obj.status.ready_replicas == 3 and ready(obj) == (v1.TRUE, "3/3 projects Running")
    assert len(await messages(fake_client)) == 3  # nothing created twice


async def test_a_terminated_replica_is_replaced(op: Operator[Any], fake_client: FakeClient) -> None:
    await fake_client.resource(m.WebFarm).create(webfarm("web", replicas=2))
    await op.reconcile("web")
    old_uid = (await fake_client.projects.get("web-1")).metadata.uid
    await set_phase(fake_client, "web-1", v1.TERMINATED)
    assert await op.reconcile("web") == Result(requeue_after=ps.REPLACEMENT_POLL)
    with pytest.raises(NotFound):
        await fake_client.projects.get("web-1")
    assert await op.reconcile("web") == Result()
    assert (await fake_client.projects.get("web-1")).metadata.uid != old_uid


async def test_scale_down_and_an_in_place_template_change(op: Operator[Any], fake_client: FakeClient) -> None:
    sets = fake_client.resource(m.WebFarm)
    await sets.create(webfarm("web", replicas=3))
    await op.reconcile("web")
    obj = await sets.get("web")
    obj.spec.replicas = 1
    obj.spec.template.spec.services[0].image = "caravanserai/busybox:other"
    await sets.update(obj)
    await op.reconcile("web")
    projects = await owned(fake_client, obj)
    assert list(projects) == ["web-0"]
    assert projects["web-0"].spec.services[0].image == "caravanserai/busybox:other"
    assert "deleted project web-2" in await messages(fake_client)
    await op.reconcile("web")
    assert (await sets.get("web")).status.replicas == 1


async def test_on_delete_policy_leaves_existing_projects_alone(op: Operator[Any], fake_client: FakeClient) -> None:
    sets = fake_client.resource(m.WebFarm)
    web = webfarm("web", replicas=1)
    web.spec.update_policy = ON_DELETE
    await sets.create(web)
    await op.reconcile("web")
    obj = await sets.get("web")
    obj.spec.template.spec.services[0].image = "caravanserai/busybox:other"
    obj.spec.replicas = 2
    await sets.update(obj)
    await op.reconcile("web")
    images = {n: p.spec.services[0].image for n, p in (await owned(fake_client, obj)).items()}
    assert images["web-1"] == "caravanserai/busybox:other" and images["web-0"] != images["web-1"]


async def test_projects_of_an_earlier_set_of_that_name_are_not_adopted(
    op: Operator[Any], fake_client: FakeClient
) -> None:
    sets = fake_client.resource(m.WebFarm)
    earlier = await sets.create(webfarm("web", replicas=1))
    stray = ps.desired_project(earlier, "web-0")
    stray.metadata.owner_references[0].uid = "uid-of-an-earlier-set"
    await fake_client.projects.create(stray)
    await op.reconcile("web")
    assert meta.controller_of(await fake_client.projects.get("web-0")).uid == "uid-of-an-earlier-set"
    await op.reconcile("web")
    assert (await sets.get("web")).status.replicas == 0


async def test_deleting_the_set_collects_its_projects(op: Operator[Any], fake_client: FakeClient) -> None:
    sets = fake_client.resource(m.WebFarm)
    await sets.create(webfarm("web", replicas=2))
    await op.reconcile("web")
    response = await sets.delete("web")
    assert response.deleted  # no finalizer of the operator holds it
    assert await op.reconcile("web") == Result()
    assert (await fake_client.projects.list()).items == []


async def test_the_finalizer_of_earlier_versions_is_removed(op: Operator[Any], fake_client: FakeClient) -> None:
    sets = fake_client.resource(m.WebFarm)
    old = webfarm("old", replicas=0)
    old.metadata.finalizers.append(ps.LEGACY_FINALIZER)
    await sets.create(old)
    await sets.delete("old")  # marked, waiting for the finalizer
    assert await op.reconcile("old") == Result()
    with pytest.raises(NotFound):
        await sets.get("old")
