"""Deleting a namespace against a real etcd and apiserver, with cara-gc's namespace controller (and the ProjectSet
controller, whose replicas live in the set's namespace): the namespace turns Terminating, what it holds is deleted
with ordinary Deletes (a bound project's finalizer holds it, and the namespace with it, until it is removed), then
the namespace goes. `default`, and a project of the same name in it, stay."""

from __future__ import annotations

from typing import Any

from cluster_sim import add_node, condition, running_manager, set_phase

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.gc.namespaces import CONDITION_CONTENT_REMAINING
from caravanserai.controllers.projectset import app as projectset_app
from caravanserai.errors import NotFound
from caravanserai.testing.builders import project
from caravanserai.testing.wait import wait_for

CLOCK = SystemClock()
FINALIZER = "example.com/stop"
TEAM = "team-a"


def controllers(client: Client):  # type: ignore[no-untyped-def]  # returns running_manager's context manager
    def setup(manager: Any) -> None:
        projectset_app.setup(manager, client, CLOCK)
        gc_app.setup(manager, client, CLOCK, gc_app.GCOptions())

    return running_manager(client, setup)


def replica_set() -> v1.ProjectSet:
    obj = v1.ProjectSet()
    obj.metadata.name, obj.metadata.namespace = "web", TEAM
    obj.spec.replicas = 1
    obj.spec.selector.match_labels["app"] = "web"
    obj.spec.template.labels["app"] = "web"
    obj.spec.template.spec.services.add(name="main", image="busybox:v1", command=["sleep", "3600"])
    return obj


async def contents(client: Client) -> dict[str, list[str]]:
    """The names of what the namespace holds, by resource (only resources holding something)."""
    found: dict[str, list[str]] = {}
    for plural in ("projects", "projectsets", "secrets", "events"):
        names = [o.metadata.name for o in await client.resource(plural).list(namespace=TEAM)]
        if names:
            found[plural] = sorted(names)
    return found


async def namespace_gone(client: Client) -> bool:
    try:
        await client.namespaces.get(TEAM)
    except NotFound:
        return True
    return False


async def test_a_deleted_namespace_is_emptied_with_finalizers_honoured_then_removed(client: Client) -> None:
    await add_node(client, "n1")
    namespace = v1.Namespace()
    namespace.metadata.name = TEAM
    await client.namespaces.create(namespace)
    held = project("web", namespace=TEAM)
    held.metadata.finalizers.append(FINALIZER)
    await client.projects.create(held)
    await set_phase(client, f"{TEAM}/web", v1.SCHEDULED, node_ref="n1")
    await set_phase(client, f"{TEAM}/web", v1.RUNNING)
    await client.projects.create(project("web"))  # the same name in default: untouched throughout
    secret = v1.Secret()
    secret.metadata.name, secret.metadata.namespace = "token", TEAM
    secret.spec.data["password"] = b"s3cret"
    await client.secrets.create(secret)
    await client.projectsets.create(replica_set())

    async with controllers(client):

        async def replica_made() -> bool:
            return any(p.metadata.name.startswith("web-") for p in await client.projects.list(namespace=TEAM))

        await wait_for(replica_made, 15)

        async def set_event_in_its_namespace() -> bool:
            events = await client.events.list(namespace=TEAM, field_selector="involvedObject.kind=ProjectSet")
            return any(e.spec.involved_object.namespace == TEAM for e in events)

        await wait_for(set_event_in_its_namespace, 10)  # the controller's event went in the set's namespace
        await client.namespaces.delete(TEAM)
        assert (await client.namespaces.get(TEAM)).status.phase == v1.NAMESPACE_TERMINATING

        async def only_the_held_project_left() -> bool:
            if await contents(client) != {"projects": ["web"]}:
                return False
            remaining = condition(await client.namespaces.get(TEAM), CONDITION_CONTENT_REMAINING)
            return remaining is not None and remaining.message == "projects: 1"

        await wait_for(only_the_held_project_left, 20)
        stopping = await client.projects.get(f"{TEAM}/web")
        assert stopping.metadata.HasField("deletion_timestamp") and stopping.status.phase == v1.TERMINATING
        await set_phase(client, f"{TEAM}/web", v1.TERMINATED)  # its node stopped it; the finalizer still holds it
        assert not await namespace_gone(client)
        stopped = await client.projects.get(f"{TEAM}/web")
        stopped.metadata.finalizers.remove(FINALIZER)
        await client.projects.update(stopped)
        await wait_for(lambda: namespace_gone(client), 20)

    survivor = await client.projects.get("web")
    assert meta.key_of(survivor) == "default/web" and not survivor.metadata.HasField("deletion_timestamp")
    assert (await client.namespaces.get(meta.DEFAULT_NAMESPACE)).status.phase == v1.NAMESPACE_ACTIVE
