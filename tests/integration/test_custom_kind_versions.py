"""Further versions of a custom kind against a real etcd and apiserver: a same-shape version converted by the
server, a version of another shape converted by a conversion hook (a small aiohttp server on loopback), and the
definition's checks of its versions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from google.protobuf import descriptor_pb2, json_format

from caravanserai import v1
from caravanserai.client import Client
from caravanserai.customkinds.schemas import Schema
from caravanserai.errors import InternalError, Invalid, NotFound
from support.customkinds import define_webfarm, webfarm, webfarm_messages

ALPHA = "webfarms.v1alpha1.example.com"
BETA = "webfarms.v1beta1.example.com"
ALPHA_SPEC = "example.webfarm.v1alpha1.WebFarmSpec"


def _with_alpha_schema(definition: v1.ResourceDefinition) -> None:
    """Add v1alpha1's spec message to the schema: `size = 1` where v1 has `replicas = 1`, and the selector."""
    files = descriptor_pb2.FileDescriptorSet.FromString(definition.spec.schema)
    alpha = files.file.add(name="webfarm_v1alpha1.proto", package="example.webfarm.v1alpha1", syntax="proto3")
    spec = alpha.message_type.add(name="WebFarmSpec")
    spec.field.add(name="size", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32, json_name="size")
    entry = spec.nested_type.add(name="SelectorEntry")
    entry.options.map_entry = True
    for number, name in ((1, "key"), (2, "value")):
        entry.field.add(name=name, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, json_name=name)
    spec.field.add(
        name="selector",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type_name=".example.webfarm.v1alpha1.WebFarmSpec.SelectorEntry",
        json_name="selector",
    )
    definition.spec.schema = files.SerializeToString()


def _alpha_class(definition: v1.ResourceDefinition) -> Any:
    spec = v1.ResourceDefinitionSpec()
    spec.CopyFrom(definition.spec)
    spec.spec_message = ALPHA_SPEC
    return Schema.compile(spec).object_cls


def _envelope(obj: Any, api_version: str) -> v1.Object:
    envelope = v1.Object()
    envelope.custom.api_version, envelope.custom.kind = api_version, "WebFarm"
    envelope.custom.object = obj.SerializeToString()
    return envelope


async def _create(client: Client, resource: str, envelope: v1.Object) -> v1.Object:
    request = v1.CreateRequest(resource=resource, object=envelope)
    reply: v1.Object = await client.call(client.stub.Create, request, retry=False)
    return reply


async def _get(client: Client, resource: str, name: str) -> v1.Object:
    reply: v1.Object = await client.call(client.stub.Get, v1.GetRequest(resource=resource, name=name), retry=False)
    return reply


async def test_a_same_shape_version_reads_and_writes_the_same_objects(client: Client) -> None:
    definition = await define_webfarm(client)
    definition.spec.versions.add(name="v1beta1")
    await client.resourcedefinitions.update(definition)
    m = webfarm_messages()
    beta = webfarm("web", replicas=3)
    beta.api_version = "example.com/v1beta1"
    created = await _create(client, BETA, _envelope(beta, "example.com/v1beta1"))
    assert created.custom.api_version == "example.com/v1beta1"
    assert m.WebFarm.FromString(created.custom.object).api_version == "example.com/v1beta1"
    stored = await client.resource(m.WebFarm).get("web")  # v1 clients see the same object
    assert stored.api_version == "example.com/v1" and stored.spec.replicas == 3
    stored.spec.replicas = 4
    await client.resource(m.WebFarm).update(stored)
    read = m.WebFarm.FromString((await _get(client, BETA, "web")).custom.object)
    assert (read.api_version, read.spec.replicas) == ("example.com/v1beta1", 4)
    listed = await client.call(client.stub.List, v1.ListRequest(resource=BETA), retry=False)
    assert [item.custom.api_version for item in listed.items] == ["example.com/v1beta1"]
    events = []
    async for event in client.stub.Watch(v1.WatchRequest(resource=BETA), timeout=5):
        events.append((event.type, event.object.custom.api_version))
        break
    assert events == [(v1.ADDED, "example.com/v1beta1")]
    with pytest.raises(Invalid) as info:
        await _get(client, "webfarms.v2.example.com", "web")
    assert [v.field for v in info.value.violations] == ["resource"] and "served as v1, v1beta1" in str(info.value)
    await client.call(client.stub.Delete, v1.DeleteRequest(resource=BETA, name="web"), retry=False)
    with pytest.raises(NotFound):
        await client.resource(m.WebFarm).get("web")


@pytest.fixture
async def converter() -> AsyncIterator[str]:
    """A conversion hook that maps v1alpha1's `size` to v1's `replicas` and back."""

    async def convert(request: web.Request) -> web.Response:
        review = (await request.json())["request"]
        desired = review["desiredAPIVersion"]
        out = []
        for obj in review["objects"]:
            spec = dict(obj.get("spec", {}))
            if desired.endswith("/v1"):
                spec = {"replicas": spec.pop("size", 0), **spec}
            else:
                spec = {"size": spec.pop("replicas", 0), "selector": spec.get("selector", {})}
            out.append({**obj, "apiVersion": desired, "spec": spec})
        return web.json_response({"response": {"convertedObjects": out}})

    app = web.Application()
    app.router.add_post("/convert", convert)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/convert"
    finally:
        await runner.cleanup()


async def test_a_version_of_another_shape_is_converted_by_the_hook(client: Client, converter: str) -> None:
    definition = await define_webfarm(client)
    _with_alpha_schema(definition)
    definition.spec.versions.add(name="v1alpha1", spec_message=ALPHA_SPEC)
    definition.spec.conversion.url = converter
    definition = await client.resourcedefinitions.update(definition)
    alpha_cls = _alpha_class(definition)
    alpha = alpha_cls()
    alpha.api_version = "example.com/v1alpha1"
    alpha.metadata.name = "web"
    alpha.spec.size = 3
    alpha.spec.selector["set"] = "web"
    created = alpha_cls.FromString((await _create(client, ALPHA, _envelope(alpha, alpha.api_version))).custom.object)
    assert (created.api_version, created.spec.size, created.metadata.generation) == ("example.com/v1alpha1", 3, 1)
    sets = client.resource(webfarm_messages().WebFarm)
    stored = await sets.get("web")
    assert stored.spec.replicas == 3 and dict(stored.spec.selector) == {"set": "web"}
    created.spec.size = 5
    request = v1.UpdateRequest(resource=ALPHA, object=_envelope(created, created.api_version))
    updated = alpha_cls.FromString((await client.call(client.stub.Update, request, retry=False)).custom.object)
    assert updated.spec.size == 5 and (await sets.get("web")).spec.replicas == 5
    assert json_format.MessageToDict(updated)["spec"] == {"size": 5, "selector": {"set": "web"}}

    definition.spec.conversion.url = converter.replace("/convert", "/gone")
    await client.resourcedefinitions.update(definition)
    with pytest.raises(InternalError) as info:
        await _get(client, ALPHA, "web")
    assert "conversion hook of WebFarm to example.com/v1alpha1 failed: answered HTTP 404" in str(info.value)
    assert (await sets.get("web")).spec.replicas == 5  # v1 needs no conversion


async def test_unusable_versions_are_refused_with_their_field(client: Client) -> None:
    definition = await define_webfarm(client)
    cases = [
        (v1.DefinitionVersion(name="v1"), "spec.versions[0].name", "not v1"),
        (v1.DefinitionVersion(name="beta"), "spec.versions[0].name", "must look like v1alpha1"),
        (v1.DefinitionVersion(name="v1alpha1", spec_message="x.Nope"), "spec.conversion.url", "is required"),
    ]
    for version, field, words in cases:
        wanted = v1.ResourceDefinition()
        wanted.CopyFrom(definition)
        wanted.spec.versions.append(version)
        with pytest.raises(Invalid) as info:
            await client.resourcedefinitions.update(wanted)
        assert field in [v.field for v in info.value.violations] and words in str(info.value), version
    wanted = v1.ResourceDefinition()
    wanted.CopyFrom(definition)
    wanted.spec.versions.add(name="v1alpha1", spec_message="x.Nope")
    wanted.spec.conversion.url = "http://127.0.0.1:9/convert"
    with pytest.raises(Invalid) as info:
        await client.resourcedefinitions.update(wanted)
    assert [v.field for v in info.value.violations] == ["spec.versions[0].specMessage"]
