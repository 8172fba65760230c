"""Custom kinds against a real etcd and real apiservers: definitions, validation through the descriptor, schema
evolution, deletion of instances with their definition, name clashes, and serving a kind defined elsewhere."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.customkinds import schemas
from caravanserai.errors import Invalid, NotFound
from caravanserai.testing.apiserver import RunningApiServer, apiserver
from caravanserai.testing.etcd import EtcdServer
from support.customkinds import GROUP, define_webfarm, webfarm, webfarm_messages


async def test_define_serves_the_kind_and_the_client_is_typed(client: Client) -> None:
    m = webfarm_messages()
    definition = await define_webfarm(client)
    assert definition.metadata.name == "webfarms.example.com"
    sets = client.resource(m.WebFarm)
    created = await sets.create(webfarm("web", replicas=3))
    assert isinstance(created, m.WebFarm)
    assert created.api_version == "example.com/v1" and created.kind == "WebFarm"
    assert created.metadata.generation == 1 and created.metadata.uid and created.spec.replicas == 3
    assert await sets.get("web") == created
    assert client.resource("wf").resource == client.resource("webfarms").resource == "webfarms"
    again = await define_webfarm(client)  # idempotent
    assert again.metadata.resource_version == definition.metadata.resource_version


async def test_definitions_are_listed_and_named_by_plural_and_group(client: Client) -> None:
    await define_webfarm(client)
    listed = await client.resourcedefinitions.list()
    assert [d.metadata.name for d in listed.items] == ["webfarms.example.com"]
    spec = listed.items[0].spec
    assert (spec.group, spec.kind, spec.plural, list(spec.short_names)) == (GROUP, "WebFarm", "webfarms", ["wf"])
    assert [(c.name, c.json_path) for c in spec.printer_columns] == [
        ("REPLICAS", ".spec.replicas"),
        ("READY", ".status.readyReplicas"),
    ]


def _raw(obj: Any, extra: bytes) -> v1.Object:
    """The envelope of `obj` with `extra` bytes appended to its serialized form (an unknown or mistyped field)."""
    envelope = v1.Object()
    envelope.custom.kind = "WebFarm"
    envelope.custom.object = obj.SerializeToString() + extra
    return envelope


def _spec_field(payload: bytes) -> bytes:
    """Field 4 (spec) of an object holding `payload`."""
    return bytes([0x22, len(payload)]) + payload


async def test_objects_are_validated_by_their_descriptor_with_field_paths(client: Client) -> None:
    await define_webfarm(client)
    obj = webfarm("bad")
    cases = {
        "unknown field": (_spec_field(bytes([0x78, 0x01])), "spec", "unknown field number 15"),
        "wrong type": (_spec_field(bytes([0x0A, 0x01, 0x41])), "spec.replicas", "has the wrong type"),
        "bad enum": (_spec_field(bytes([0x20, 0x07])), "spec.updatePolicy", "7 is not a value of UpdatePolicy"),
    }
    for case, (extra, path, message) in cases.items():
        request = v1.CreateRequest(resource="webfarms", object=_raw(obj, extra))
        with pytest.raises(Invalid) as info:
            await client.call(client.stub.Create, request, retry=False)
        assert [(v.field, message in v.description) for v in info.value.violations] == [(path, True)], case
    bad_name = webfarm("Not_A_Name")
    with pytest.raises(Invalid) as info:
        await client.resource(webfarm_messages().WebFarm).create(bad_name)
    assert [v.field for v in info.value.violations] == ["metadata.name"]


async def test_status_is_a_subresource_and_generation_follows_spec(client: Client) -> None:
    await define_webfarm(client)
    sets = client.resource(webfarm_messages().WebFarm)
    with_status = webfarm("s")
    with_status.status.ready_replicas = 1
    with pytest.raises(Invalid) as info:
        await sets.create(with_status)
    assert [v.field for v in info.value.violations] == ["status"]
    created = await sets.create(webfarm("s", replicas=1))
    created.status.ready_replicas = 5
    created.spec.replicas = 2
    updated = await sets.update(created)
    assert updated.spec.replicas == 2 and updated.status.ready_replicas == 0 and updated.metadata.generation == 2
    updated.status.ready_replicas = 2
    updated.spec.replicas = 9
    status = await sets.update_status(updated)
    assert status.status.ready_replicas == 2 and status.spec.replicas == 2 and status.metadata.generation == 2


async def test_schema_evolution_refuses_breaking_changes_and_accepts_new_fields(client: Client) -> None:
    definition = await define_webfarm(client)
    await client.resource(webfarm_messages().WebFarm).create(webfarm("kept", replicas=2))

    def changed(edit: Any) -> v1.ResourceDefinition:
        files = descriptor_pb2.FileDescriptorSet.FromString(definition.spec.schema)
        for file in files.file:
            for message in file.message_type:
                if message.name == "WebFarmSpec":
                    edit(message)
        new = v1.ResourceDefinition()
        new.CopyFrom(definition)
        new.spec.schema = files.SerializeToString()
        return new

    def retype(message: Any) -> None:
        message.field[0].type = descriptor_pb2.FieldDescriptorProto.TYPE_STRING

    def reuse(message: Any) -> None:
        message.field[0].name = "count"
        message.field[0].json_name = "count"

    def remove(message: Any) -> None:
        del message.field[0]

    for edit, description in (
        (retype, "field number 1 changes type from int32 to string"),
        (reuse, "field number 1 is renamed to count, which stored objects and clients do not follow"),
        (remove, "field number 1 was removed; stored objects may hold it: to retire the field, reserve"),
    ):
        with pytest.raises(Invalid) as info:
            await client.resourcedefinitions.update(changed(edit))
        assert [(v.field, v.description[: len(description)]) for v in info.value.violations] == [
            ("spec.replicas", description)
        ]

    def add(message: Any) -> None:
        message.field.add(
            name="paused", number=9, type=descriptor_pb2.FieldDescriptorProto.TYPE_BOOL, json_name="paused"
        )

    updated = await client.resourcedefinitions.update(changed(add))
    assert updated.spec.schema != definition.spec.schema


async def test_deleting_a_definition_deletes_its_instances(client: Client) -> None:
    await define_webfarm(client)
    sets = client.resource(webfarm_messages().WebFarm)
    for name in ("a", "b", "c"):
        await sets.create(webfarm(name))
    response = await client.resourcedefinitions.delete("webfarms.example.com")
    assert response.deleted and response.deleted_instances == 3
    deadline = time.monotonic() + 5
    while True:
        try:
            await sets.list()
        except Invalid as exc:
            assert "unknown resource 'webfarms'" in str(exc)
            break
        assert time.monotonic() < deadline, "the kind is still served 5 s after its definition was deleted"
        await asyncio.sleep(0.05)
    await define_webfarm(client)
    assert len((await sets.list()).items) == 0  # a new definition starts empty


async def test_name_clashes_are_refused(client: Client) -> None:
    m = webfarm_messages()
    with pytest.raises(Invalid) as info:
        await client.define(
            m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group="example.com", plural="projects"
        )
    assert ("spec.plural", '"projects" is taken by built-in kind Project') in [
        (v.field, v.description) for v in info.value.violations
    ]
    await define_webfarm(client)
    other = schemas.definition_for(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group="other.org")
    other.spec.short_names.append("wf")
    with pytest.raises(Invalid) as info:
        await client.resourcedefinitions.create(other)
    fields = {v.field: v.description for v in info.value.violations}
    assert fields["spec.plural"] == '"webfarms" is taken by definition webfarms.example.com'
    assert fields["spec.shortNames[0]"] == '"wf" is taken by definition webfarms.example.com'


async def test_bad_definitions_name_the_field(client: Client) -> None:
    m = webfarm_messages()
    bad = schemas.definition_for(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group="example.com")
    bad.spec.schema = b"\xff\xff"
    bad.spec.status_message = "example.webfarm.Nope"
    bad.spec.printer_columns.add(name="X", json_path="status")
    with pytest.raises(Invalid) as info:
        await client.resourcedefinitions.create(bad)
    fields = [v.field for v in info.value.violations]
    assert fields == ["spec.printerColumns[0].jsonPath", "spec.schema"]
    bad = schemas.definition_for(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group="example.com")
    bad.metadata.name = "wrong.example.com"
    with pytest.raises(Invalid) as info:
        await client.resourcedefinitions.create(bad)
    assert [v.field for v in info.value.violations] == ["metadata.name"]


async def test_a_kind_defined_through_one_apiserver_is_served_by_another(
    etcd: EtcdServer, api: RunningApiServer
) -> None:
    async with (
        apiserver(etcd.endpoint, prefix=api.prefix) as second,
        Client(api.address, timeout=10) as first_client,
        Client(second.address, timeout=10) as second_client,
    ):
        await define_webfarm(first_client)
        sets = second_client.resource(webfarm_messages().WebFarm)
        started = time.monotonic()
        while True:
            try:
                created = await sets.create(webfarm("via-second"))
                break
            except Invalid:
                assert time.monotonic() - started < 1.0, "the second apiserver did not serve the kind within 1 s"
                await asyncio.sleep(0.02)
        watched = first_client.resource(webfarm_messages().WebFarm)
        assert await watched.get("via-second") == created


async def test_custom_kinds_survive_an_apiserver_restart(etcd: EtcdServer) -> None:
    async with apiserver(etcd.endpoint) as first, Client(first.address, timeout=10) as c:
        await define_webfarm(c)
        kept = await c.resource(webfarm_messages().WebFarm).create(webfarm("kept"))
    async with apiserver(etcd.endpoint, prefix=first.prefix) as again, Client(again.address, timeout=10) as c:
        sets = c.resource(webfarm_messages().WebFarm)
        listed = await sets.list()  # served from the first request on
        assert [o.metadata.name for o in listed.items] == ["kept"]
        await sets.create(webfarm("after"))
        resumed = [ch async for ch in _first(sets.watch(resource_version=kept.metadata.resource_version), 1)]
        assert [(ch.type, ch.object.metadata.name) for ch in resumed] == [(v1.ADDED, "after")]


async def _first(changes: Any, n: int) -> Any:
    """The first `n` changes of a watch (within 10 s)."""
    got = 0
    async with asyncio.timeout(10):
        async for change in changes:
            yield change
            got += 1
            if got == n:
                return


async def test_an_undefined_kind_is_an_unknown_resource(client: Client) -> None:
    with pytest.raises(Invalid) as info:
        await client.call(client.stub.Get, v1.GetRequest(resource="webfarms", name="x"), retry=False)
    assert "unknown resource 'webfarms'" in str(info.value)
    with pytest.raises(NotFound):
        await client.resourcedefinitions.get("webfarms.example.com")
