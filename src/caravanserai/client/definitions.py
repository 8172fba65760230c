"""Defining custom kinds from a client, and learning the ones a server serves.

* `define` is idempotent: it creates the ResourceDefinition, or updates it when its spec differs (the server
  refuses incompatible schema changes), registers the kind in this process and returns once the server answers
  for the kind (every apiserver serves it within about a second).
* `register` is what an operator calls at start: the definition is installed by the deployment (`caractrl apply -f`
  of it, or `caractrl define`), and the operator only checks that the served definition is compatible with its
  classes (`IncompatibleDefinition`, naming each field, when it is not; `DefinitionMissing` when none is served)
  and registers its kind in this process. An older build of the operator therefore runs against a newer
  definition (a rollback, a mixed-version rollout): fields only the served schema has travel as unknown fields,
  which protobuf keeps, so an update by the older class writes them back unchanged.
* `discover` registers every served custom kind that this process does not know yet, with classes compiled from
  the definition's schema (for generic tools such as `caractrl`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from caravanserai import meta, v1
from caravanserai.clock import Clock
from caravanserai.customkinds import evolution, schemas
from caravanserai.errors import AlreadyExists, FieldViolation, Invalid, NotFound

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


class DefinitionMissing(LookupError):
    """No definition of the kind is served: the deployment has not installed it."""


class IncompatibleDefinition(ValueError):
    """The served definition cannot be used with this process's classes; `violations` name the fields."""

    def __init__(self, name: str, violations: list[FieldViolation]) -> None:
        self.violations = violations
        reasons = "; ".join(f"{v.field}: {v.description}" for v in violations)
        super().__init__(f"the served definition {name} is not compatible with this build's classes: {reasons}")


async def register(
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
    """See `Client.register`."""
    wanted = schemas.definition_of(names, cls, spec=spec, status=status)
    try:
        served = await definitions.get(names.definition_name)
    except NotFound:
        raise DefinitionMissing(
            f"no definition {names.definition_name} is served; install it first (caractrl apply -f <definition> "
            "or caractrl define)"
        ) from None
    check_compatible(wanted, served)
    kind = meta.register(schemas.KindNames.of_spec(served.spec).kind_entry(cls))
    await wait_served(list_one, kind, clock=clock, timeout=timeout)
    return served


def check_compatible(wanted: v1.ResourceDefinition, served: v1.ResourceDefinition) -> None:
    """IncompatibleDefinition unless objects of the `served` definition can be read and written with the classes of
    `wanted` (same kind; every field of the classes served under the same number, name and type)."""
    name = served.metadata.name
    if served.spec.kind != wanted.spec.kind:
        kind = FieldViolation("spec.kind", f"is {served.spec.kind}, the class is {wanted.spec.kind}")
        raise IncompatibleDefinition(name, [kind])
    found = evolution.incompatibilities(schemas.Schema.compile(wanted.spec), schemas.Schema.compile(served.spec))
    if found:
        raise IncompatibleDefinition(name, found)


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


__all__ = [
    "DefinitionMissing",
    "Definitions",
    "IncompatibleDefinition",
    "ListOne",
    "apply_definition",
    "check_compatible",
    "define",
    "discover",
    "register",
    "wait_served",
]
