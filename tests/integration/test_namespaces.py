"""Namespaces through a real apiserver over real etcd: the upgrade of a store written before namespaces existed,
the same name in two namespaces, the rules of creating into and deleting namespaces, and the node authorizer's
answers by namespace."""

from __future__ import annotations

import asyncio
import base64
import os
import uuid
from pathlib import Path

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver import codec
from caravanserai.client import Client
from caravanserai.errors import FailedPrecondition, Forbidden, Invalid, NotFound
from caravanserai.process.identity import Identity
from caravanserai.storage import EtcdClient, Store
from caravanserai.storage.encryption import Encryption, load_key_file
from caravanserai.testing import builders
from caravanserai.testing.apiserver import apiserver
from caravanserai.testing.etcd import EtcdServer
from support.customkinds import define_webfarm, webfarm, webfarm_messages


def _namespace(name: str) -> v1.Namespace:
    return v1.Namespace(metadata=v1.ObjectMeta(name=name))


def _project(name: str, namespace: str = "") -> v1.Project:
    project = builders.project(name)
    project.metadata.namespace = namespace
    return project


def _secret(name: str, namespace: str = "", **data: bytes) -> v1.Secret:
    secret = meta.with_type_meta(v1.Secret())
    secret.metadata.name, secret.metadata.namespace = name, namespace
    secret.spec.data.update(data)
    return secret


def _key_file(path: Path) -> str:
    path.write_text(f"k1 {base64.b64encode(os.urandom(32)).decode()}\n")
    return str(path)


async def _write_as_the_previous_release(etcd: EtcdServer, prefix: str, key_file: str) -> dict[str, str]:
    """Objects stored the way the release before namespaces stored them: a bare name as the key, no namespace in the
    value, Secrets sealed for that key, Events on a lease. Returns their uids by resource."""
    async with EtcdClient([etcd.endpoint]) as client:
        encryption = Encryption(load_key_file(key_file), resources=["secrets"])
        store = Store(client, prefix, encryption=encryption)
        project = builders.project("web")
        project.metadata.uid = str(uuid.uuid4())
        project.metadata.generation = 3
        project.metadata.finalizers.append("example.com/keep")
        project.status.phase = v1.PENDING
        secret = _secret("db", password=b"s3cret")
        secret.metadata.uid = str(uuid.uuid4())
        event = meta.with_type_meta(v1.Event())
        event.metadata.name, event.metadata.uid = "web.1", str(uuid.uuid4())
        event.spec.involved_object.kind, event.spec.involved_object.name = "Project", "web"
        event.spec.reason, event.spec.type = "Scheduled", "Normal"
        lease = await store.grant_lease(3600)
        await store.create("projects", "web", codec.encode(project))
        await store.create("secrets", "db", codec.encode(secret))
        await store.create("events", "web.1", codec.encode(event), lease=lease)
        node = builders.node("n1")
        await store.create("nodes", "n1", codec.encode(node))
    return {"projects": project.metadata.uid, "secrets": secret.metadata.uid, "events": event.metadata.uid}


async def test_an_upgrade_moves_every_stored_object_into_default_without_loss(etcd: EtcdServer, tmp_path: Path) -> None:
    prefix = f"/test-{uuid.uuid4().hex[:12]}"
    key_file = _key_file(tmp_path / "keys")
    uids = await _write_as_the_previous_release(etcd, prefix, key_file)
    # Two apiservers starting at once both try the move: each object moves exactly once.
    async with (
        apiserver(etcd.endpoint, prefix=prefix, encryption_key_file=key_file) as first,
        apiserver(etcd.endpoint, prefix=prefix, encryption_key_file=key_file) as second,
        Client(first.address) as c,
        Client(second.address) as c2,
    ):
        project = await c.projects.get("web")
        assert (project.metadata.namespace, project.metadata.uid) == ("default", uids["projects"])
        assert project.metadata.generation == 3 and list(project.metadata.finalizers) == ["example.com/keep"]
        secret = await c2.secrets.get("default/db")
        assert secret.metadata.uid == uids["secrets"] and secret.spec.data["password"] == b"s3cret"
        events = await c.events.list()
        assert [(e.metadata.namespace, e.metadata.uid) for e in events] == [("default", uids["events"])]
        assert (await c.nodes.get("n1")).metadata.namespace == ""  # cluster-wide: stays where it was
        assert [n.metadata.name for n in await c.namespaces.list()] == ["default"]
        async with EtcdClient([etcd.endpoint]) as raw:
            keys = [kv.key.decode() for kv in (await raw.range(prefix.encode() + b"/", prefix.encode() + b"0")).kvs]
            event_key = (await raw.range(f"{prefix}/events/default/web.1".encode())).kvs
        built_in = ("/compaction", "/clusterroles/", "/clusterrolebindings/")  # kept by every apiserver
        names = sorted(k.removeprefix(prefix) for k in keys if not any(part in k for part in built_in))
        assert names == [
            "/events/default/web.1",
            "/namespaces/default",
            "/nodes/n1",
            "/projects/default/web",
            "/secrets/default/db",
        ]
        assert event_key[0].lease != 0  # the Event still expires with its lease


async def test_the_same_name_lives_in_two_namespaces(client: Client) -> None:
    for name in ("team-a", "team-b"):
        created = await client.namespaces.create(_namespace(name))
        assert created.status.phase == v1.NAMESPACE_ACTIVE
    a = await client.projects.create(_project("web", "team-a"))
    team_b = client.projects.in_namespace("team-b")
    b = await team_b.create(builders.project("web"))
    assert (a.metadata.namespace, b.metadata.namespace) == ("team-a", "team-b")
    assert a.metadata.uid != b.metadata.uid
    assert sorted(meta.key_of(p) for p in await client.projects.list()) == ["team-a/web", "team-b/web"]
    assert [meta.key_of(p) for p in await team_b.list()] == ["team-b/web"]
    assert [meta.key_of(p) for p in await client.projects.list(field_selector="metadata.namespace=team-a")] == [
        "team-a/web"
    ]
    with pytest.raises(NotFound):
        await client.projects.get("web")  # not in default

    seen: list[str] = []

    async def watch_team_a() -> None:
        async for change in client.projects.watch(namespace="team-a", resource_version="0"):
            seen.append(f"{change.type} {meta.key_of(change.object)}")
            if change.type == v1.DELETED:
                return

    watching = asyncio.create_task(watch_team_a())
    await client.projects.delete("team-b/web", force=True)
    await client.projects.delete("team-a/web", force=True)
    await asyncio.wait_for(watching, 10)
    assert seen == ["ADDED team-a/web", "DELETED team-a/web"]


async def test_creating_into_and_deleting_namespaces(client: Client) -> None:
    with pytest.raises(NotFound, match='namespace "nowhere" not found'):
        await client.secrets.create(_secret("s", "nowhere"))
    node = builders.node("n9")
    node.metadata.namespace = "default"
    with pytest.raises(Invalid, match=r"metadata\.namespace") as info:
        await client.nodes.create(node)
    assert "cluster-wide" in str(info.value)
    with pytest.raises(Invalid, match=r"metadata\.namespace"):
        await client.secrets.create(_secret("s", "Not_A_Label"))
    with pytest.raises(FailedPrecondition, match='"default" cannot be deleted'):
        await client.namespaces.delete("default")

    await client.namespaces.create(_namespace("empty"))
    gone = await client.namespaces.delete("empty")
    assert gone.deleted  # nothing in it: removed at once

    await client.namespaces.create(_namespace("team-c"))
    await client.secrets.create(_secret("s", "team-c", k=b"v"))
    marked = await client.namespaces.delete("team-c")
    assert not marked.deleted and marked.object.namespace.status.phase == v1.NAMESPACE_TERMINATING
    with pytest.raises(FailedPrecondition, match="being deleted"):
        await client.configs.create(v1.Config(metadata=v1.ObjectMeta(name="c", namespace="team-c")))
    event = meta.with_type_meta(v1.Event())
    event.metadata.name, event.metadata.namespace = "team-c.1", "team-c"
    event.spec.involved_object.kind, event.spec.involved_object.name = "Namespace", "team-c"
    event.spec.reason, event.spec.type = "Deleting", "Normal"
    await client.events.create(event)  # what happens during the deletion is still recorded
    assert not (await client.namespaces.delete("team-c")).deleted  # still holds objects
    await client.secrets.delete("team-c/s")
    await client.events.delete(f"team-c/{event.metadata.name}")
    assert (await client.namespaces.delete("team-c")).deleted
    assert [n.metadata.name for n in await client.namespaces.list()] == ["default"]


async def test_a_node_reads_only_what_its_projects_reference_in_their_namespace(etcd: EtcdServer) -> None:
    async with apiserver(etcd.endpoint) as api, Client(api.address) as c:
        await c.namespaces.create(_namespace("team-a"))
        for namespace in ("default", "team-a"):
            await c.secrets.create(_secret("db", namespace, password=namespace.encode()))
        project = _project("web", "team-a")
        project.spec.image_pull_secrets.append("db")
        stored = await c.projects.create(project)
        stored.status.phase, stored.status.node_ref = v1.SCHEDULED, "n1"
        await c.projects.update_status(stored)
        service = api.server.service
        assert service is not None
        node = Identity("node:n1")

        async def readable() -> bool:
            try:
                await service.get("secrets", "db", namespace="team-a", who=node)
            except Forbidden:
                return False
            return True

        for _ in range(100):  # the authorizer follows the projects' watch cache
            if await readable():
                break
            await asyncio.sleep(0.05)
        assert await readable()
        with pytest.raises(Forbidden):
            await service.get("secrets", "db", namespace="default", who=node)
        listed = await service.list(v1.ListRequest(resource="secrets"), who=node)
        assert [meta.key_of(o.secret) for o in listed.items] == ["team-a/db"]


async def test_a_custom_kind_declares_its_scope(client: Client) -> None:
    definition = await define_webfarm(client, namespaced=True)
    assert definition.spec.scope == "Namespaced"
    await client.namespaces.create(_namespace("team-a"))
    farms = client.resource(webfarm_messages().WebFarm)
    await farms.create(webfarm("web"))
    in_a = farms.in_namespace("team-a")
    await in_a.create(webfarm("web"))
    assert sorted(meta.key_of(f) for f in await farms.list()) == ["default/web", "team-a/web"]
    assert [meta.key_of(f) for f in await in_a.list()] == ["team-a/web"]
    # The namespace holds a custom object: its deletion waits for it.
    assert not (await client.namespaces.delete("team-a")).deleted
    await in_a.delete("web")
    assert (await client.namespaces.delete("team-a")).deleted
    stored = await client.resourcedefinitions.get(definition.metadata.name)
    stored.spec.scope = "Cluster"
    with pytest.raises(Invalid, match=r"spec\.scope.*cannot change"):
        await client.resourcedefinitions.update(stored)
    stored.spec.scope = "Galaxy"
    with pytest.raises(Invalid, match=r"spec\.scope"):
        await client.resourcedefinitions.update(stored)
