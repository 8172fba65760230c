"""The handler layer's level handlers (`on_reconcile`), owned dependents (`owns`) and retired finalizers, on the
FakeClient: directly through `reconcile`, and under a real Manager whose informers watch the fake."""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.controller import Manager, Result
from caravanserai.customkinds.schemas import register
from caravanserai.errors import NotFound
from caravanserai.operator import Context, Operator, Requeue, TemporaryError, when
from caravanserai.testing import FakeClient, FakeClock, running, wait_for
from support.customkinds import GROUP, webfarm, webfarm_messages

WebFarm = webfarm_messages().WebFarm
register(WebFarm, group=GROUP)
OTHER = "example.com/retired"


def project(name: str, owner: Any | None = None, *, controller: bool = True) -> v1.Project:
    obj = meta.with_type_meta(v1.Project())
    obj.metadata.name = name
    service = obj.spec.services.add()
    service.name, service.image = "main", "busybox"
    if owner is not None:
        meta.set_owner(obj, owner, controller=controller)
    return obj


async def test_a_level_handler_runs_at_every_reconcile(fake_client: FakeClient, fake_clock: FakeClock) -> None:
    op: Operator[Any] = Operator("sets", WebFarm, fake_client, clock=fake_clock)
    calls: list[str] = []

    @op.on_create()
    async def created(ctx: Context[Any]) -> None:
        calls.append("create")

    @op.on_reconcile()
    async def converge(ctx: Context[Any]) -> Requeue | None:
        calls.append(ctx.reason)
        ctx.status.replicas = ctx.obj.spec.replicas
        return Requeue(after=5.0) if len(calls) > 3 else None

    @op.on_reconcile(when=when(lambda obj: obj.spec.replicas > 10))
    async def never(ctx: Context[Any]) -> None:
        calls.append("never")

    await fake_client.resource(WebFarm).create(webfarm("web", replicas=2))
    assert await op.reconcile("web") == Result()
    assert await op.reconcile("web") == Result()  # nothing changed: only the level handler
    assert await op.reconcile("web") == Result(requeue_after=5.0)
    assert calls == ["create", "reconcile", "reconcile", "reconcile"]
    assert (await fake_client.resource(WebFarm).get("web")).status.replicas == 2


async def test_a_level_handler_error_asks_a_reconcile_after_its_delay(
    fake_client: FakeClient, fake_clock: FakeClock
) -> None:
    op: Operator[Any] = Operator("sets", WebFarm, fake_client, clock=fake_clock)

    @op.on_reconcile()
    async def converge(ctx: Context[Any]) -> None:
        raise TemporaryError("not yet", delay=7.0)

    await fake_client.resource(WebFarm).create(webfarm("web"))
    assert await op.reconcile("web") == Result(requeue_after=7.0)
    assert not (await fake_client.resource(WebFarm).get("web")).metadata.annotations  # no change handlers


async def test_owner_keys_follow_the_controller_reference_of_this_kind(fake_client: FakeClient) -> None:
    op: Operator[Any] = Operator("sets", WebFarm, fake_client)
    web = await fake_client.resource(WebFarm).create(webfarm("web"))
    assert op.owner_keys(project("web-0", web)) == ["web"]
    assert op.owner_keys(project("loose")) == []
    assert op.owner_keys(project("shared", web, controller=False)) == []  # owned, not controlled
    other = await fake_client.projects.create(project("parent"))
    assert op.owner_keys(project("child", other)) == []  # controlled by a Project, not a WebFarm


async def test_a_change_of_an_owned_dependent_reconciles_its_owner() -> None:
    client = FakeClient()
    manager = Manager(client)
    op: Operator[Any] = Operator("sets", WebFarm, client)
    op.owns(v1.Project)
    op.owns(v1.Project)  # once is enough
    seen: list[int] = []

    @op.on_reconcile()
    async def count(ctx: Context[Any]) -> None:
        listed = await ctx.client.projects.list()
        seen.append(sum(1 for p in listed.items if meta.is_owned_by(p, ctx.obj)))

    op.setup(manager)
    assert op.owned == [v1.Project]
    async with running(manager):
        web = await client.resource(WebFarm).create(webfarm("web"))
        await wait_for(lambda: seen[-1:] == [0], 10)
        await client.projects.create(project("web-0", web))  # the set itself does not change
        await wait_for(lambda: seen[-1:] == [1], 10, message="the owner reconciled after its project appeared")
        await client.projects.delete("web-0")
        await wait_for(lambda: seen[-1:] == [0], 10, message="the owner reconciled after its project went")


async def test_retired_finalizers_are_removed_also_while_deleting(fake_client: FakeClient) -> None:
    op: Operator[Any] = Operator("sets", WebFarm, fake_client, retired_finalizers=[OTHER])
    sets = fake_client.resource(WebFarm)
    live, doomed = webfarm("live"), webfarm("doomed")
    for obj in (live, doomed):
        obj.metadata.finalizers.extend([OTHER, "keep.example.com/mine"])
        await sets.create(obj)
    await sets.delete("doomed")
    await op.reconcile("live")
    assert list((await sets.get("live")).metadata.finalizers) == ["keep.example.com/mine"]
    await op.reconcile("doomed")
    assert list((await sets.get("doomed")).metadata.finalizers) == ["keep.example.com/mine"]
    gone = webfarm("gone")
    gone.metadata.finalizers.append(OTHER)
    await sets.create(gone)
    await sets.delete("gone")
    assert await op.reconcile("gone") == Result()
    try:
        await sets.get("gone")
    except NotFound:
        return
    raise AssertionError("the set whose only finalizer was retired should be gone")
