"""One entry of the CLI's kind table: what caractrl shows and offers for a kind (`KindView`).

A view holds, for one kind:

* `columns`: the `get` table (headers, wide headers, the row function, the sort order) and `lookups`, what its
  rows read besides their own object (listed once per table, not once per row);
* `describe`: the `describe` layout, given a client for what it reads besides the object and its events;
* `wait_fields`: the status fields `wait --for FIELD=VALUE` compares (`phase` of a project); `hopeless`: why a
  wait can no longer succeed (a project that reached another final phase); `waitable`, `deletable`: whether
  `wait` and `delete` take the kind;
* `schema`: what `caractrl schema` requires beyond the descriptors (None: no schema is offered);
* `for_selector`: how `get --for KIND/NAME` narrows a listing of this kind (None: `--for` is refused);
* `users`: who still uses an object of this kind (`project/web`, …): `delete` refuses it while anyone does, naming
  them, unless `--force` (None: nothing is checked);
* `with_volumes`: marks an object so that its deletion removes its volumes too (`delete --volumes`; None: the kind
  has none), returning a warning line when nothing will remove them; `on=False` takes the mark back;
* `deletion_note`: what `delete` says of an object marked for deletion, when its kind says more than "stays until
  its finalizers are removed" (None: that).

The defaults are the generic behaviour every kind gets (custom kinds: columns from their definition's printer
columns, metadata/spec/status descriptions, `condition=` and `delete` waits).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from caravanserai import meta, v1
from caravanserai.cli.describe_other import describe_generic
from caravanserai.cli.tables import Columns, RowContext
from caravanserai.client import Client

Describer = Callable[[Client, Any, Sequence[v1.Event], float], Awaitable[str]]
"""`describe(client, obj, events about obj, now)`: the text of `caractrl describe` for one object."""

Predicate = Callable[[Any], bool]


class VolumesMark(Protocol):
    """`mark(client, name, on=True)`: ask (or, `on=False`, no longer ask) that deleting `name` removes its volumes;
    a warning line when nothing will."""

    def __call__(self, client: Client, name: str, *, on: bool = True) -> Awaitable[str | None]: ...


@dataclass(frozen=True, slots=True)
class Condition:
    """One `wait --for` clause: its text and a test on the object (None when the object does not exist).
    `field`/`value` are set for a `FIELD=VALUE` clause on one of the kind's `wait_fields` (`phase=Running`)."""

    text: str
    test: Predicate
    wants_absent: bool = False
    field: str = ""
    value: str = ""


@dataclass(frozen=True, slots=True)
class SchemaBits:
    """What `caractrl schema` says beyond the descriptors: top-level fields required besides apiVersion, kind and
    metadata, and the fields the server always requires (by message name and camelCase field name; `non_empty`
    lists must have an entry)."""

    top_required: tuple[str, ...] = ()
    required: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    non_empty: frozenset[tuple[str, str]] = frozenset()


def offline(describe: Callable[[Any, Sequence[v1.Event], float], str]) -> Describer:
    """A describer for a layout that needs nothing but the object and its events."""

    async def run(client: Client, obj: Any, events: Sequence[v1.Event], now: float) -> str:
        return describe(obj, events, now)

    return run


async def no_lookups(client: Client) -> RowContext:
    """The row context of kinds whose rows read nothing but their own object."""
    return RowContext()


@dataclass(frozen=True, slots=True)
class KindView:
    """What the CLI shows and offers for one kind (see the module docstring)."""

    plural: str
    columns: Columns
    lookups: Callable[[Client], Awaitable[RowContext]] = no_lookups
    describe: Describer = offline(describe_generic)  # noqa: RUF009  # a stateless closure, safe to share
    wait_fields: Mapping[str, Callable[[Any], str]] = field(default_factory=lambda: MappingProxyType({}))
    hopeless: Callable[[Any, Sequence[Condition]], str | None] | None = None
    waitable: bool = False
    deletable: bool = False
    schema: SchemaBits | None = None
    for_selector: Callable[[meta.Kind, str], str] | None = None
    users: Callable[[Client, str], Awaitable[list[str]]] | None = None
    with_volumes: VolumesMark | None = None
    deletion_note: Callable[[Client, Any], Awaitable[str]] | None = None


__all__ = ["Condition", "Describer", "KindView", "Predicate", "SchemaBits", "VolumesMark", "no_lookups", "offline"]
