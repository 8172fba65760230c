"""Defining custom kinds from a client, and learning the ones a server serves.

* `define` is idempotent: it creates the ResourceDefinition, or updates it when its spec differs (the server
  refuses incompatible schema changes), registers the kind in this process and returns once the server answers
  for the kind (every apiserver serves it within about a second).
* `discover` registers every served custom kind that this process does not know yet, with classes compiled from
  the definition's schema (for generic tools such as `caractrl`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from caravanserai import meta, v1
from caravanserai.clock import Clock
from caravanserai.customkinds import schemas
from caravanserai.errors import AlreadyExists, Invalid, NotFound

POLL_SECONDS = 0.05


class Definitions(Protocol):
    """What these functions need of the `resourcedefinitions` client (`Client.resourcedefinitions`), so that this
    module does not import the client that calls it."""

    async def create(self, obj: v1.ResourceDefinition) -> v1.ResourceDefinition: ...

    async def get(self, name: str) -> v1.ResourceDefinition: ...

    async def update(self, obj: v1.ResourceDefinition) -> v1.ResourceDefinition: ...

    async def list(self) -> Iterable[v1.ResourceDefinition]: ...


ListOne = Callable[[meta.Kind], Awaitable[object]]
"""List at most one object of a kind (`Client.resource(kind.cls).list(limit=1)`): how `wait_served` asks."""


async def define(
    definitions: Definitions,
    cls: type[Any],
    names: schemas.KindNames,
    *,
    spec: type[Any],
    status: type[Any],
    list_one: ListOne,
    clock: Clock,
    timeout: float = 10.0,
) -> v1.ResourceDefinition:
    """See `Client.define` (which builds `names` from its keyword arguments)."""
    stored = await apply_definition(definitions, schemas.definition_of(names, cls, spec=spec, status=status))
    kind = meta.register(names.kind_entry(cls))
    await wait_served(list_one, kind, clock=clock, timeout=timeout)
    return stored


async def apply_definition(definitions: Definitions, wanted: v1.ResourceDefinition) -> v1.ResourceDefinition:
    """Create `wanted`, or update the stored definition of that name to its spec; the stored definition."""
    try:
        return await definitions.create(wanted)
    except AlreadyExists:
        pass
    current = await definitions.get(wanted.metadata.name)
    if current.spec == wanted.spec:
        return current
    current.spec.CopyFrom(wanted.spec)
    return await definitions.update(current)


async def wait_served(list_one: ListOne, kind: meta.Kind, *, clock: Clock, timeout: float) -> None:
    """Return once the server answers a List of `kind`; Unavailable-like TimeoutError after `timeout` seconds."""
    deadline = clock.monotonic() + timeout
    while True:
        try:
            await list_one(kind)
            return
        except Invalid as exc:  # "unknown resource" until the server has seen the definition
            if clock.monotonic() >= deadline:
                raise TimeoutError(f"the server does not serve {kind.plural} after {timeout} s: {exc}") from None
        await clock.sleep(POLL_SECONDS)


async def discover(definitions: Definitions) -> list[meta.Kind]:
    """See `Client.discover`."""
    found: list[meta.Kind] = []
    try:
        served = await definitions.list()
    except NotFound:
        return found
    known = {k.plural: k for k in meta.registered()}
    for definition in served:
        kind = known.get(definition.spec.plural)
        if kind is None or (kind.custom and kind != schemas.kind_for_definition(definition, kind.cls)):
            try:
                kind = meta.register(schemas.kind_for_definition(definition, kind.cls if kind else None))
            except (schemas.SchemaError, ValueError):
                continue  # a definition the server does not serve either
        found.append(kind)
    return found


__all__ = ["Definitions", "ListOne", "apply_definition", "define", "discover", "wait_served"]
