"""Custom kinds across schema changes, against a real etcd and apiserver: an older build of an operator registers
its classes against a newer definition and keeps the fields it does not know (a rollback), a compatible re-define
keeps watches open, and a field is retired once no stored object sets it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, message_factory

from caravanserai import v1
from caravanserai.client import Client, DefinitionMissing, IncompatibleDefinition
from caravanserai.customkinds import schemas
from caravanserai.errors import Invalid
from support.customkinds import GROUP, PRINTER_COLUMNS, define_webfarm, webfarm, webfarm_messages

Field = descriptor_pb2.FieldDescriptorProto
Edit = Callable[[Any], None]


@pytest.fixture(autouse=True)
def example_class_registered() -> Iterator[None]:
    """These tests register classes of other schemas for webfarms in this process; put the example's back."""
    yield
    m = webfarm_messages()
    schemas.register(m.WebFarm, group=GROUP, short_names=("wf",), printer_columns=PRINTER_COLUMNS)


def _schema(edit: Edit) -> schemas.Schema:
    """The example's schema with `edit` applied to WebFarmSpec's DescriptorProto, compiled in a private pool."""
    m = webfarm_messages()
    definition = schemas.definition_for(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group=GROUP)
    files = descriptor_pb2.FileDescriptorSet.FromString(definition.spec.schema)
    for file in files.file:
        for message in file.message_type:
            if message.name == "WebFarmSpec":
                edit(message)
    definition.spec.schema = files.SerializeToString()
    return schemas.Schema.compile(definition.spec)


def _classes(schema: schemas.Schema) -> tuple[Any, Any, Any]:
    return (
        schema.object_cls,
        message_factory.GetMessageClass(schema.spec),
        message_factory.GetMessageClass(schema.status),
    )


def _add_compress(message: Any) -> None:
    message.field.add(name="compress", number=9, type=Field.TYPE_BOOL, json_name="compress")


def _retire_compress(message: Any) -> None:
    message.reserved_range.add(start=9, end=10)
    message.reserved_name.append("compress")


async def _define(client: Client, edit: Edit) -> Any:
    """Define webfarms with the example schema edited by `edit`; its object class."""
    cls, spec, status = _classes(_schema(edit))
    await client.define(cls, spec=spec, status=status, group=GROUP, short_names=("wf",))
    return cls


async def test_an_older_class_registers_against_a_newer_definition_and_keeps_its_fields(client: Client) -> None:
    new_cls = await _define(client, _add_compress)
    obj = new_cls.FromString(webfarm("web", replicas=1).SerializeToString())
    obj.spec.compress = True
    await client.resource(new_cls).create(obj)

    m = webfarm_messages()  # the older build: no spec.compress
    served = await client.register(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group=GROUP)
    assert served.metadata.name == "webfarms.example.com"
    old = await client.resource(m.WebFarm).get("web")
    old.spec.replicas = 4
    await client.resource(m.WebFarm).update(old)

    raw = await client.call(client.stub.Get, v1.GetRequest(resource="webfarms", name="web"), retry=False)
    stored = new_cls.FromString(raw.custom.object)
    assert (stored.spec.replicas, stored.spec.compress) == (4, True)  # the field the old class does not know


async def test_register_refuses_an_incompatible_or_missing_definition(client: Client) -> None:
    cls, spec, status = _classes(_schema(_add_compress))
    with pytest.raises(DefinitionMissing, match="install it first"):
        await client.register(cls, spec=spec, status=status, group=GROUP)
    await define_webfarm(client)  # served: no spec.compress
    with pytest.raises(IncompatibleDefinition) as info:
        await client.register(cls, spec=spec, status=status, group=GROUP)
    assert [v.field for v in info.value.violations] == ["spec.compress"]
    assert "spec.compress: field number 9 was removed" in str(info.value)


async def test_a_compatible_redefine_keeps_watches_open(client: Client) -> None:
    m = webfarm_messages()
    first = await define_webfarm(client)
    sets = client.resource(m.WebFarm)
    await sets.create(webfarm("a"))
    events: list[tuple[int, str]] = []

    async def follow() -> None:
        async for change in sets.watch(resource_version=first.metadata.resource_version):
            if change.type != v1.BOOKMARK:
                events.append((change.type, change.object.metadata.name))

    watching = asyncio.create_task(follow())
    try:
        await asyncio.sleep(0.3)
        await _define(client, _add_compress)  # compatible: a new field
        await sets.create(webfarm("b"))
        async with asyncio.timeout(10):
            while (v1.ADDED, "b") not in events:
                assert not watching.done(), f"the watch ended: {watching.exception() if watching.done() else ''}"
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        # one stream from start to end: no re-list (a second ADDED for "a") after the re-define
        assert events == [(v1.ADDED, "a"), (v1.ADDED, "b")]
        assert not watching.done()
    finally:
        watching.cancel()


async def test_a_field_is_retired_once_no_stored_object_sets_it(client: Client) -> None:
    new_cls = await _define(client, _add_compress)
    objects = client.resource(new_cls)
    for name in ("a", "b", "c"):
        obj = new_cls.FromString(webfarm(name).SerializeToString())
        obj.spec.compress = True
        await objects.create(obj)
    await objects.create(new_cls.FromString(webfarm("d").SerializeToString()))

    retired = _classes(_schema(_retire_compress))
    with pytest.raises(Invalid) as info:
        await client.define(retired[0], spec=retired[1], status=retired[2], group=GROUP, short_names=("wf",))
    assert [(v.field, v.description) for v in info.value.violations] == [
        ("spec.compress", "3 objects still set spec.compress; clear it first")
    ]
    for name in ("a", "b", "c"):
        obj = await objects.get(name)
        obj.spec.compress = False
        await objects.update(obj)
    await client.define(retired[0], spec=retired[1], status=retired[2], group=GROUP, short_names=("wf",))
    left = await client.resource(retired[0]).list()
    assert sorted(o.metadata.name for o in left.items) == ["a", "b", "c", "d"]


async def test_removing_or_renaming_a_field_says_what_to_do(client: Client) -> None:
    await _define(client, _add_compress)

    def drop(message: Any) -> None:
        del message.field[-1]

    def rename(message: Any) -> None:
        message.field[-1].name = message.field[-1].json_name = "compression"

    for edit, expected in (
        (drop, 'to retire the field, reserve its number and name (reserved 9; reserved "compress";)'),
        (rename, "field number 9 is renamed to compression"),
    ):
        cls, spec, status = _classes(_schema(lambda m, e=edit: (_add_compress(m), e(m))))
        with pytest.raises(Invalid) as info:
            await client.define(cls, spec=spec, status=status, group=GROUP, short_names=("wf",))
        assert [v.field for v in info.value.violations] == ["spec.compress"]
        assert expected in info.value.violations[0].description
