"""The handler layer on a namespaced kind: keys are "namespace/name", an owned dependent's owner is looked up in the
dependent's namespace, and two objects of the same name in two namespaces are handled apart."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.operator import Context, Operator
from caravanserai.testing import FakeClient, FakeClock
from caravanserai.testing.builders import project


def replica_set(namespace: str, replicas: int) -> v1.ProjectSet:
    obj = v1.ProjectSet()
    obj.metadata.name, obj.metadata.namespace = "web", namespace
    obj.spec.replicas = replicas
    return obj


async def test_objects_of_the_same_name_in_two_namespaces_are_handled_apart(
    fake_client: FakeClient, fake_clock: FakeClock
) -> None:
    op: Operator[v1.ProjectSet] = Operator("sets", v1.ProjectSet, fake_client, clock=fake_clock)
    handled: list[str] = []

    @op.on_create()
    async def created(ctx: Context[v1.ProjectSet]) -> None:
        handled.append(ctx.key)
        ctx.status.replicas = ctx.obj.spec.replicas

    @op.on_delete()
    async def deleted(ctx: Context[v1.ProjectSet]) -> None:
        handled.append(f"deleted {ctx.key}")

    for namespace, replicas in (("team-a", 1), ("team-b", 2)):
        await fake_client.projectsets.create(replica_set(namespace, replicas))
    await op.reconcile("team-a/web")
    await op.reconcile("team-b/web")
    assert handled == ["team-a/web", "team-b/web"]
    assert [(await fake_client.projectsets.get(f"{ns}/web")).status.replicas for ns in ("team-a", "team-b")] == [1, 2]
    await fake_client.projectsets.delete("team-a/web")
    await op.reconcile("team-a/web")
    assert handled[-1] == "deleted team-a/web"
    assert [meta.key_of(s) for s in await fake_client.projectsets.list()] == ["team-b/web"]


def test_the_owner_of_a_dependent_is_in_the_dependents_namespace(fake_client: FakeClient) -> None:
    op: Operator[v1.ProjectSet] = Operator("sets", v1.ProjectSet, fake_client)
    owner = replica_set("team-a", 1)
    owner.metadata.uid = "u-1"
    dependent = project("web-1", namespace="team-a")
    meta.set_owner(dependent, owner, controller=True)
    assert op.owner_keys(dependent) == ["team-a/web"]
