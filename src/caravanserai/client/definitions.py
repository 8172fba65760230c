"""Defining custom kinds from a client, and learning the ones a server serves.

* `define` is idempotent: it creates the ResourceDefinition, or updates it when its spec differs (the server
  refuses incompatible schema changes), registers the kind in this process and returns once the server answers
  for the kind (every apiserver serves it within about a second).
* `discover` registers every served custom kind that this process does not know yet, with classes compiled from
  the definition's schema (for generic tools such as `caractrl`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from caravanserai import meta, v1
from caravanserai.customkinds import schemas
from caravanserai.errors import AlreadyExists, Invalid, NotFound

if TYPE_CHECKING:
    from caravanserai.client.client import Client

POLL_SECONDS = 0.05


async def define(
    client: Client,
    cls: type[Any],
    names: schemas.KindNames,
    *,
    spec: type[Any],
    status: type[Any],
    timeout: float = 10.0,
) -> v1.ResourceDefinition:
    """See `Client.define` (which builds `names` from its keyword arguments)."""
    stored = await apply_definition(client, schemas.definition_of(names, cls, spec=spec, status=status))
    kind = meta.register(names.kind_entry(cls))
    await wait_served(client, kind, timeout=timeout)
    return stored


async def apply_definition(client: Client, wanted: v1.ResourceDefinition) -> v1.ResourceDefinition:
    """Create `wanted`, or update the stored definition of that name to its spec; the stored definition."""
    definitions = client.resourcedefinitions
    try:
        return await definitions.create(wanted)
    except AlreadyExists:
        pass
    current = await definitions.get(wanted.metadata.name)
    if current.spec == wanted.spec:
        return current
    current.spec.CopyFrom(wanted.spec)
    return await definitions.update(current)


async def wait_served(client: Client, kind: meta.Kind, *, timeout: float) -> None:
    """Return once the server answers a List of `kind`; Unavailable-like TimeoutError after `timeout` seconds."""
    deadline = client.clock.monotonic() + timeout
    while True:
        try:
            await client.resource(kind.cls).list(limit=1)
            return
        except Invalid as exc:  # "unknown resource" until the server has seen the definition
            if client.clock.monotonic() >= deadline:
                raise TimeoutError(f"the server does not serve {kind.plural} after {timeout} s: {exc}") from None
        await client.clock.sleep(POLL_SECONDS)


async def discover(client: Client) -> list[meta.Kind]:
    """See `Client.discover`."""
    found: list[meta.Kind] = []
    try:
        definitions = await client.resourcedefinitions.list()
    except NotFound:
        return found
    known = {k.plural: k for k in meta.registered()}
    for definition in definitions:
        kind = known.get(definition.spec.plural)
        if kind is None or (kind.custom and kind != schemas.kind_for_definition(definition, kind.cls)):
            try:
                kind = meta.register(schemas.kind_for_definition(definition, kind.cls if kind else None))
            except (schemas.SchemaError, ValueError):
                continue  # a definition the server does not serve either
        found.append(kind)
    return found


__all__ = ["apply_definition", "define", "discover", "wait_served"]
