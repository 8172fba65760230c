"""Further versions of a custom kind, served next to the stored v1 and converted on the way in and out.

A definition lists its further versions in `spec.versions` (e.g. `v1alpha1`). Objects are always stored as v1
(apiVersion `<group>/v1`, resource `<plural>`); a client of another version addresses the resource as
`<plural>.<version>.<group>` (kubectl's fully qualified form, e.g. `webfarms.v1alpha1.example.com`) on every
verb (Create, Get, List, Update, UpdateStatus, Delete, Watch) and reads and writes the same objects:

* what it sends is converted to v1 before the apiserver defaults, checks and stores it (the v1 rules, hooks,
  authorization and resource versions apply unchanged); what it reads (replies, list items, watch events) is
  converted from v1 to its version;
* a version whose spec and status messages are those of v1 (the default) is converted by re-reading the bytes
  (same shape: no hook needed; field numbers are what both versions share);
* a version of another shape is converted by the definition's `conversion` hook: the apiserver POSTs

      {"apiVersion": "caravanserai/v1", "kind": "ConversionReview",
       "request": {"uid": "…", "desiredAPIVersion": "example.com/v1", "objects": [{…}, …]}}

  and expects `{"convertedObjects": [{…}, …]}` (or the same inside "response"), one object per object sent, in
  order. Of what it returns, metadata is the apiserver's (the sent object's); a hook that fails refuses the
  request with InternalError naming it.

Limits: v1 is the stored version (a definition cannot store another); fields of v1 that a version does not have
are lost when a client of that version updates the object (keep such versions' shapes a superset, or have the
hook carry the fields in annotations).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from caravanserai import v1
from caravanserai.apiserver.kindrules.callbacks import MAX_TIMEOUT, HookFailed, post_review, url_problem
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.customkinds.schemas import Schema, SchemaError
from caravanserai.errors import FieldViolation, InternalError, Invalid
from caravanserai.text.violations import quote

VERSION_NAME = re.compile(r"v[1-9][0-9]*(?:(?:alpha|beta)[1-9][0-9]*)?")
_ALIAS = re.compile(
    r"(?P<plural>[a-z][a-z0-9]*)\.(?P<version>v[1-9][0-9]*(?:(?:alpha|beta)[1-9][0-9]*)?)\.(?P<group>.+)"
)


def _version_spec(spec: v1.ResourceDefinitionSpec, version: v1.DefinitionVersion) -> v1.ResourceDefinitionSpec:
    out = v1.ResourceDefinitionSpec()
    out.CopyFrom(spec)
    out.spec_message = version.spec_message or spec.spec_message
    out.status_message = version.status_message or spec.status_message
    return out


def _same_shape(spec: v1.ResourceDefinitionSpec, version: v1.DefinitionVersion) -> bool:
    return (version.spec_message or spec.spec_message, version.status_message or spec.status_message) == (
        spec.spec_message,
        spec.status_message,
    )


def problems(spec: v1.ResourceDefinitionSpec) -> list[FieldViolation]:
    """What is wrong with a definition's versions and conversion hook (empty: they can be served)."""
    found: list[FieldViolation] = []
    seen: set[str] = set()
    for i, version in enumerate(spec.versions):
        where = f"spec.versions[{i}]"
        if not VERSION_NAME.fullmatch(version.name) or version.name == "v1":
            found.append(FieldViolation(f"{where}.name", f"{quote(version.name)} must look like v1alpha1, v2 (not v1)"))
        elif version.name in seen:
            found.append(FieldViolation(f"{where}.name", f"{quote(version.name)} is listed twice"))
        seen.add(version.name)
        if not _same_shape(spec, version) and not spec.conversion.url:
            found.append(
                FieldViolation("spec.conversion.url", f"is required: version {version.name} has its own shape")
            )
        if spec.schema and spec.spec_message:
            try:
                Schema.compile(_version_spec(spec, version))
            except SchemaError as exc:
                found.append(FieldViolation(f"{where}.{exc.field.removeprefix('spec.')}", exc.message))
    if spec.conversion.url:
        problem = url_problem(spec.conversion.url)
        if problem:
            found.append(FieldViolation("spec.conversion.url", problem))
    if not 0 <= spec.conversion.timeout_seconds <= MAX_TIMEOUT:
        found.append(FieldViolation("spec.conversion.timeoutSeconds", f"must be between 0 and {MAX_TIMEOUT:g}"))
    return found


class Version:
    """One further version of a served kind: its class and its conversions to and from v1."""

    def __init__(self, definition: v1.ResourceDefinition, version: v1.DefinitionVersion, storage_cls: type[Any]):
        """Build the version's classes (SchemaError when they do not build)."""
        spec = definition.spec
        self.name = version.name
        self.api_version = f"{spec.group}/{version.name}"
        self.storage_api_version = f"{spec.group}/v1"
        self.kind = spec.kind
        self.cls: type[Any] = Schema.compile(_version_spec(spec, version)).object_cls
        self.storage_cls = storage_cls
        self.same_shape = _same_shape(spec, version)
        self.hook = spec.conversion

    async def to_storage(self, objects: Sequence[Any]) -> list[Any]:
        """`objects` of this version as v1 objects."""
        return await self._convert(objects, self.storage_cls, self.storage_api_version)

    async def from_storage(self, objects: Sequence[Any]) -> list[Any]:
        """v1 `objects` as objects of this version."""
        return await self._convert(objects, self.cls, self.api_version)

    async def _convert(self, objects: Sequence[Any], cls: type[Any], api_version: str) -> list[Any]:
        if not objects:
            return []
        if self.same_shape:
            converted = [cls.FromString(obj.SerializeToString()) for obj in objects]
        else:
            converted = await self._call_hook(objects, cls, api_version)
        for before, after in zip(objects, converted, strict=True):
            after.metadata.CopyFrom(type(after.metadata).FromString(before.metadata.SerializeToString()))
            after.api_version, after.kind = api_version, self.kind
        return converted

    async def _call_hook(self, objects: Sequence[Any], cls: type[Any], api_version: str) -> list[Any]:
        review = {
            "apiVersion": "caravanserai/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "desiredAPIVersion": api_version,
                "objects": [json_format.MessageToDict(obj) for obj in objects],
            },
        }
        try:
            reply = await post_review(
                self.hook.url, review, timeout=self.hook.timeout_seconds, ca_bundle=self.hook.ca_bundle
            )
            items = reply.get("convertedObjects")
            if not isinstance(items, list) or len(items) != len(objects):
                raise HookFailed(f"the reply must hold convertedObjects, {len(objects)} of them")
            return [json_format.ParseDict(item, cls(), ignore_unknown_fields=False) for item in items]
        except (HookFailed, json_format.ParseError, TypeError) as exc:
            raise InternalError(f"conversion hook of {self.kind} to {api_version} failed: {exc}") from None


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request's resource leads: the stored resource, and the version to convert through (None: v1)."""

    resource: str
    version: Version | None = None

    async def incoming(self, envelope: v1.Object) -> v1.Object:
        """The request's object as a v1 envelope (unchanged for v1 requests)."""
        if self.version is None:
            return envelope
        if envelope.WhichOneof("object") != "custom" or envelope.custom.kind not in ("", self.version.kind):
            raise Invalid.of([FieldViolation("kind", f"request for {self.resource} must carry a {self.version.kind}")])
        try:
            obj = self.version.cls.FromString(envelope.custom.object)
        except Exception as exc:  # DecodeError and its relatives
            raise Invalid.of([FieldViolation("object", f"not a valid {self.version.kind}: {exc}")]) from None
        if obj.api_version not in ("", self.version.api_version):
            problem = f"{quote(obj.api_version)} sent to {self.version.api_version}"
            raise Invalid.of([FieldViolation("apiVersion", problem)])
        (stored,) = await self.version.to_storage([obj])
        return _envelope(stored, self.version.storage_api_version, self.version.kind)

    async def outgoing(self, envelope: v1.Object) -> v1.Object:
        """A v1 envelope of the reply, in the request's version."""
        if self.version is None or envelope.WhichOneof("object") != "custom":
            return envelope
        (converted,) = await self.version.from_storage([self.version.storage_cls.FromString(envelope.custom.object)])
        return _envelope(converted, self.version.api_version, self.version.kind)

    async def outgoing_list(self, response: v1.ListResponse) -> v1.ListResponse:
        if self.version is None:
            return response
        stored = [self.version.storage_cls.FromString(item.custom.object) for item in response.items]
        converted = await self.version.from_storage(stored)
        del response.items[:]
        response.items.extend(_envelope(obj, self.version.api_version, self.version.kind) for obj in converted)
        return response

    async def outgoing_event(self, data: bytes) -> bytes:
        """A serialized WatchEvent with its object in the request's version."""
        if self.version is None:
            return data
        event = v1.WatchEvent.FromString(data)
        if event.type == v1.BOOKMARK and event.object.WhichOneof("object") == "custom":
            bookmark = self.version.cls()  # only metadata (its resource version): no conversion needed
            bookmark.metadata.ParseFromString(
                self.version.storage_cls.FromString(event.object.custom.object).metadata.SerializeToString()
            )
            event.object.CopyFrom(_envelope(bookmark, self.version.api_version, self.version.kind))
        elif event.HasField("object"):
            event.object.CopyFrom(await self.outgoing(event.object))
        return event.SerializeToString()


def _envelope(obj: Any, api_version: str, kind: str) -> v1.Object:
    envelope = v1.Object()
    envelope.custom.api_version = api_version
    envelope.custom.kind = kind
    envelope.custom.object = obj.SerializeToString()
    return envelope


async def route(resource: str, strategy_of: Callable[[str], Awaitable[KindStrategy[Any]]]) -> Route:
    """The route of `resource`: itself, or for `<plural>.<version>.<group>` the plural and the version (Invalid
    naming `resource` when the kind does not serve that version). `strategy_of` finds (and waits for) a kind."""
    alias = _ALIAS.fullmatch(resource)
    if alias is None:
        return Route(resource)
    strategy = await strategy_of(alias["plural"])
    versions: dict[str, Version] = getattr(strategy, "versions", {})
    if strategy.kind.group != alias["group"] or (alias["version"] != "v1" and alias["version"] not in versions):
        served = ", ".join(["v1", *sorted(versions)])
        problem = f"{quote(resource)}: {strategy.kind.kind} of {strategy.kind.group} is served as {served}"
        raise Invalid.of([FieldViolation("resource", problem)])
    return Route(alias["plural"], versions.get(alias["version"]))


__all__ = ["VERSION_NAME", "Route", "Version", "problems", "route"]
