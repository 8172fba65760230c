"""The kinds the API serves, and helpers every component uses on objects and their conditions.

`KINDS` is the one table mapping a plural resource name ("projects") to its kind ("Project"), message class and
field in the `v1.Object` envelope. Generic code (apiserver, client, informer, CLI) goes through it, so adding a
kind is one line here plus its messages.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from google.protobuf.message import Message

from caravanserai import v1
from caravanserai.clock import timestamp

Resource: TypeAlias = v1.Project | v1.Node | v1.Lease | v1.Event
T = TypeVar("T", v1.Project, v1.Node, v1.Lease, v1.Event)


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind served by the API."""

    kind: str  # "Project"
    plural: str  # "projects": the resource name used in requests and etcd keys
    cls: type[Any]  # the message class, e.g. v1.Project
    field: str  # the field of v1.Object holding it, e.g. "project"
    short_names: tuple[str, ...] = ()
    cluster_scoped: bool = True  # every kind is cluster-scoped today (there are no namespaces)

    def wrap(self, obj: Message) -> v1.Object:
        """`obj` (of this kind) in the `v1.Object` envelope (copied)."""
        envelope = v1.Object()
        getattr(envelope, self.field).CopyFrom(obj)
        return envelope


KINDS: dict[str, Kind] = {
    k.plural: k
    for k in (
        Kind("Project", "projects", v1.Project, "project", ("project", "proj", "p")),
        Kind("Node", "nodes", v1.Node, "node", ("node", "no")),
        Kind("Lease", "leases", v1.Lease, "lease", ("lease",)),
        Kind("Event", "events", v1.Event, "event", ("event", "ev")),
    )
}
_BY_KIND = {k.kind: k for k in KINDS.values()}
_BY_CLASS: dict[type[Any], Kind] = {k.cls: k for k in KINDS.values()}


def kind_for(resource: str) -> Kind:
    """The Kind for a plural resource name, a singular/short name or a kind name (case-insensitive).

    Raises KeyError naming the known resources when nothing matches.
    """
    wanted = resource.lower()
    for k in KINDS.values():
        if wanted in (k.plural, k.kind.lower(), *k.short_names):
            return k
    raise KeyError(f"unknown resource {resource!r}; known: {', '.join(sorted(KINDS))}")


def kind_of(obj: Message) -> Kind:
    """The Kind of a message instance (v1.Project → projects …)."""
    try:
        return _BY_CLASS[type(obj)]
    except KeyError:
        raise TypeError(f"{type(obj).__name__} is not a caravanserai/v1 kind") from None


def kind_named(kind: str) -> Kind:
    """The Kind for an exact kind name ("Project"); KeyError otherwise."""
    return _BY_KIND[kind]


def wrap(obj: Message) -> v1.Object:
    """Put an object into the `v1.Object` envelope (copying it)."""
    return kind_of(obj).wrap(obj)


def unwrap(envelope: v1.Object) -> Any:
    """The object inside a `v1.Object` envelope (the envelope's own sub-message, not a copy)."""
    field = envelope.WhichOneof("object")
    if field is None:
        raise ValueError("empty object envelope")
    return getattr(envelope, field)


def with_type_meta(obj: T) -> T:
    """Set api_version and kind on `obj` (in place) and return it."""
    obj.api_version = v1.API_VERSION
    obj.kind = kind_of(obj).kind
    return obj


def copy(obj: T) -> T:
    """A deep copy: cached objects are read-only, whoever writes copies first."""
    out = type(obj)()
    out.CopyFrom(obj)
    return out


def name_of(obj: Message) -> str:
    # Message declares no fields; every kind's message has metadata.name, a str.
    return obj.metadata.name  # type: ignore[attr-defined, no-any-return]


# ---------------------------------------------------------------------------------------------------------------
# Conditions


def get_condition(conditions: MutableSequence[v1.Condition], type_: str) -> v1.Condition | None:
    """The condition of `type_`, or None."""
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def set_condition(
    conditions: MutableSequence[v1.Condition],
    type_: str,
    status: str,
    *,
    reason: str = "",
    message: str = "",
    now: float,
) -> bool:
    """Add or replace the condition of `type_`; return True when anything changed.

    last_transition_time moves only when `status` changes (or, for the Phase condition, when the reason or message
    does: each phase change is its own transition); last_heartbeat_time is set to `now` on every change.
    """
    existing = get_condition(conditions, type_)
    if existing is not None and (existing.status, existing.reason, existing.message) == (status, reason, message):
        return False
    if existing is None:
        # conditions is a repeated message field (it has add()), typed by the MutableSequence it also is.
        existing = conditions.add()  # type: ignore[attr-defined]
        existing.type = type_
        transitioned = True
    else:
        transitioned = existing.status != status or type_ == v1.CONDITION_PHASE
    existing.status = status
    existing.reason = reason
    existing.message = message
    existing.last_heartbeat_time.CopyFrom(timestamp(now))
    if transitioned:
        existing.last_transition_time.CopyFrom(timestamp(now))
    return True


def remove_condition(conditions: MutableSequence[v1.Condition], type_: str) -> bool:
    """Remove the condition of `type_`; return True when one was removed."""
    for i, cond in enumerate(conditions):
        if cond.type == type_:
            del conditions[i]
            return True
    return False


def set_phase(project: v1.Project, phase: str, *, reason: str, message: str, now: float) -> None:
    """Change a project's phase and record it in the `Phase` condition, as every phase change must."""
    project.status.phase = phase
    set_condition(project.status.conditions, v1.CONDITION_PHASE, v1.TRUE, reason=reason, message=message, now=now)


__all__ = [
    "KINDS",
    "Kind",
    "Resource",
    "copy",
    "get_condition",
    "kind_for",
    "kind_named",
    "kind_of",
    "name_of",
    "remove_condition",
    "set_condition",
    "set_phase",
    "unwrap",
    "with_type_meta",
    "wrap",
]
