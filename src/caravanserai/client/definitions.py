"""Defining custom kinds from a client, and learning the ones a server serves.

* `define` is idempotent: it creates the ResourceDefinition, or updates it when its spec differs (the server
  refuses incompatible schema changes), registers the kind in this process and returns once the server answers
  for the kind (every apiserver serves it within about a second).
* `discover` registers every served custom kind that this process does not know yet, with classes compiled from
  the definition's schema (for generic tools such as `caractrl`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from caravanserai.customkinds import schemas
from caravanserai import meta, v1
from caravanserai.errors import AlreadyExists, Invalid, NotFound

if TYPE_CHECKING:
    from caravanserai.client.client import Client

POLL_SECONDS = 0.05


async def define(
    client: Client,
    cls: type[Any],
    *,
    spec: type[Any],
    status: type[Any],
    group: str,
    plural: str = "",
    short_names: Sequence[str] = (),
    printer_columns: Sequence[tuple[str, str]] = (),
    node_verbs: Sequence[str] = (),
    timeout: float = 10.0,
) -> v1.ResourceDefinition:
    """See `Client.define`."""
    wanted = schemas.definition_for(
        cls,
        spec=spec,
        status=status,
        group=group,
        plural=plural,
        short_names=short_names,
        printer_columns=printer_columns,
        node_verbs=node_verbs,
    )
    stored = await apply_definition(client, wanted)
    kind = schemas.register(
        cls, group=group, plural=wanted.spec.plural, short_names=short_names, printer_columns=printer_columns
    )
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
        if kind is None or (kind.custom and not _same_names(kind, definition)):
            try:
                kind = meta.register(schemas.kind_for_definition(definition, kind.cls if kind else None))
            except (schemas.SchemaError, ValueError):
                continue  # a definition the server does not serve either
        found.append(kind)
    return found


def _same_names(kind: meta.Kind, definition: v1.ResourceDefinition) -> bool:
    spec = definition.spec
    columns = tuple((c.name, c.json_path) for c in spec.printer_columns)
    return (kind.kind, kind.group, kind.short_names, kind.printer_columns) == (
        spec.kind, spec.group, tuple(spec.short_names), columns
    )


__all__ = ["apply_definition", "define", "discover", "wait_served"]
