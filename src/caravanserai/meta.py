"""The kinds the API serves, and helpers every component uses on objects and their conditions.

`KINDS` is the one table mapping a plural resource name ("projects") to its kind ("Project"), message class and
field in the `v1.Object` envelope. Generic code (apiserver verbs, watch cache, client, informer, manifests) goes
through it and never names a kind; what differs per kind lives in two more tables, one entry per kind each.

Adding a built-in kind is:

1. **Messages**: `<Kind>`, `<Kind>Spec`, `<Kind>Status` in `proto/caravanserai/v1/`, a field for it in the
   `v1.Object` envelope's `object` oneof; regenerate (`make generate`) and re-export the classes from
   `caravanserai.v1`.
2. **Here**: one `Kind(...)` line in `KINDS` (names, class, envelope field, `confidential`), and the class in the
   `Resource` type below (and `caravanserai.text.manifest.Resource`) so typed code accepts it.
3. **Apiserver**: a strategy with the kind's rules beside it, `apiserver/kinds/<kind>.py` (a
   `KindStrategy[v1.<Kind>]`: defaults, validation, delete plan, node access), one line in
   `apiserver.kinds.BUILTIN`.
4. **CLI**: a view, `cli/kinds/<kind>.py` (a `KindView`: `get` columns, `describe` layout, `wait` fields, schema
   bits), one line in `cli.kinds.VIEWS`.

Optional: a typed attribute on `caravanserai.client.Client` (`client.<plural>`; `client.resource("<plural>")`
works without it), the plural in `caravanserai.client.apply.APPLICABLE` when `apply` should take the kind, and
its page in `docs/`. Tests guard the tables: `tests/unit/apiserver/test_kind_table.py` (one strategy per kind, no
kind branch in the apiserver) and `tests/unit/cli/test_cli_kind_table.py` (one view per kind, no kind branch in the
CLI).

Custom kinds need none of this: a ResourceDefinition carries their names and schema (`customkinds`), the
apiserver serves them with a generic strategy and the CLI shows them through their printer columns.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, TypeAlias, TypeVar

from google.protobuf.message import Message

from caravanserai import v1
from caravanserai.clock import timestamp

Resource: TypeAlias = (
    v1.Project
    | v1.Node
    | v1.Lease
    | v1.Event
    | v1.Secret
    | v1.Config
    | v1.BackupRepository
    | v1.AdmissionPolicy
    | v1.ProjectSet
    | v1.Namespace
    | v1.Role
    | v1.ClusterRole
    | v1.RoleBinding
    | v1.ClusterRoleBinding
    | v1.ResourceQuota
    | v1.Route
)


class _TypeMeta(Protocol):
    api_version: str
    kind: str


class _Copyable(Protocol):
    def CopyFrom(self, other_msg: Self) -> None: ...


T = TypeVar("T", bound=_TypeMeta)  # an object of any kind, built-in or custom: it carries type meta
M = TypeVar("M", bound=_Copyable)  # any message, including a kind strategy's generic one (`apiserver.kinds.base.T`)


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind served by the API: a built-in one (`group` empty, apiVersion caravanserai/v1) or a custom kind
    defined by a ResourceDefinition (apiVersion `<group>/v1`, carried in the envelope's `custom` branch)."""

    kind: str  # "Project"
    plural: str  # "projects": the resource name used in requests and etcd keys
    cls: type[Any]  # the message class, e.g. v1.Project
    field: str  # the field of v1.Object holding it, e.g. "project" ("custom" for custom kinds)
    short_names: tuple[str, ...] = ()
    cluster_scoped: bool = True  # objects are cluster-wide (False: each lives in a namespace, `metadata.namespace`)
    group: str = ""  # API group of a custom kind, e.g. "example.com"; "" for built-in kinds
    printer_columns: tuple[tuple[str, str], ...] = ()  # (header, JSON path) extra columns of `caractrl get`
    confidential: bool = False  # values only for identities allowed to read them; never shown in tables or views

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1" if self.group else v1.API_VERSION

    @property
    def custom(self) -> bool:
        return bool(self.group)

    def names(self) -> tuple[str, ...]:
        """Every lowercase name the kind answers to: plural, kind, short names."""
        return (self.plural, self.kind.lower(), *self.short_names)

    def wrap(self, obj: Any) -> v1.Object:
        """`obj` (of this kind) in the `v1.Object` envelope (copied)."""
        envelope = v1.Object()
        if self.custom:
            custom = envelope.custom
            custom.api_version = self.api_version
            custom.kind = self.kind
            custom.object = obj.SerializeToString()
        else:
            getattr(envelope, self.field).CopyFrom(obj)
        return envelope

    def unwrap(self, envelope: v1.Object) -> Any:
        """The object of this kind inside `envelope` (custom kinds: a fresh message; built-in kinds: the envelope's
        own sub-message). ValueError when the envelope holds another kind; DecodeError for undecodable bytes."""
        field = envelope.WhichOneof("object")
        if field != self.field or (self.custom and envelope.custom.kind not in ("", self.kind)):
            got = envelope.custom.kind if field == "custom" else field or "nothing"
            raise ValueError(f"expected a {self.kind}, got {got}")
        if self.custom:
            return self.cls.FromString(envelope.custom.object)
        return getattr(envelope, field)


KINDS: dict[str, Kind] = {
    k.plural: k
    for k in (
        Kind("Project", "projects", v1.Project, "project", ("project", "proj", "p"), cluster_scoped=False),
        Kind("Node", "nodes", v1.Node, "node", ("node", "no")),
        Kind("Lease", "leases", v1.Lease, "lease", ("lease",)),
        Kind("Event", "events", v1.Event, "event", ("event", "ev"), cluster_scoped=False),
        Kind(
            "ResourceDefinition",
            "resourcedefinitions",
            v1.ResourceDefinition,
            "resource_definition",
            ("resourcedefinition", "rd"),
        ),
        Kind("Secret", "secrets", v1.Secret, "secret", ("secret",), cluster_scoped=False, confidential=True),
        Kind("Config", "configs", v1.Config, "config", ("config", "cfg"), cluster_scoped=False),
        Kind(
            "BackupRepository",
            "backuprepositories",
            v1.BackupRepository,
            "backup_repository",
            ("backuprepository", "backuprepo", "brepo"),
            cluster_scoped=False,
        ),
        Kind(
            "AdmissionPolicy",
            "admissionpolicies",
            v1.AdmissionPolicy,
            "admission_policy",
            ("admissionpolicy", "ap"),
        ),
        Kind("NodeGroup", "nodegroups", v1.NodeGroup, "node_group", ("nodegroup", "ng")),
        Kind(
            "ProjectSet",
            "projectsets",
            v1.ProjectSet,
            "project_set",
            ("projectset", "pset", "ps"),
            cluster_scoped=False,
        ),
        Kind("Namespace", "namespaces", v1.Namespace, "namespace", ("namespace", "ns")),
        Kind("Role", "roles", v1.Role, "role", ("role",), cluster_scoped=False),
        Kind("ClusterRole", "clusterroles", v1.ClusterRole, "cluster_role", ("clusterrole",)),
        Kind("RoleBinding", "rolebindings", v1.RoleBinding, "role_binding", ("rolebinding",), cluster_scoped=False),
        Kind(
            "ClusterRoleBinding",
            "clusterrolebindings",
            v1.ClusterRoleBinding,
            "cluster_role_binding",
            ("clusterrolebinding",),
        ),
        Kind(
            "ResourceQuota",
            "resourcequotas",
            v1.ResourceQuota,
            "resource_quota",
            ("resourcequota", "quota"),
            cluster_scoped=False,
        ),
        Kind("Route", "routes", v1.Route, "route", ("route", "rt"), cluster_scoped=False),
    )
}
"""The built-in kinds, by plural."""
_CUSTOM: dict[str, Kind] = {}  # custom kinds this process registered (client side), by plural
_BY_NAME: dict[str, Kind] = {k.kind: k for k in KINDS.values()}  # every known kind by kind name
_BY_CLASS: dict[type[Any], Kind] = {k.cls: k for k in KINDS.values()}  # every known kind by message class


def register(kind: Kind) -> Kind:
    """Make a custom kind known to this process, so that `kind_for`, `kind_of` and `wrap` find it (a client does this
    in `Client.define` and `Client.resource(cls)`). Re-registering a plural replaces the entry. Returns `kind`."""
    if kind.plural in KINDS or not kind.custom:
        raise ValueError(f"{kind.plural} is a built-in kind")
    _CUSTOM[kind.plural] = kind
    _BY_NAME.clear()
    _BY_NAME.update({k.kind: k for k in registered()})
    _BY_CLASS.clear()
    _BY_CLASS.update({k.cls: k for k in registered()})
    return kind


def registered() -> list[Kind]:
    """Every kind this process knows: the built-in ones, then registered custom kinds."""
    return [*KINDS.values(), *_CUSTOM.values()]


def kind_for(resource: str) -> Kind:
    """The Kind for a plural resource name, a singular/short name or a kind name (case-insensitive), built-in or
    registered.

    Raises KeyError naming the known resources when nothing matches.
    """
    wanted = resource.lower()
    for k in registered():
        if wanted in k.names():
            return k
    raise KeyError(f"unknown resource {resource!r}; known: {', '.join(sorted(k.plural for k in registered()))}")


SUBRESOURCES: dict[str, str] = {"projects/log": "get", "projects/exec": "create", "projects/portforward": "create"}
"""What roles may grant beyond a kind's objects, with the one verb each is asked with (Kubernetes' `pods/log`,
`pods/exec`, `pods/portforward`): a project's container logs, exec into its containers, and port-forward to them.
They are served by the agent of the project's node, which asks the apiserver's authorizer (`Authorize`)."""


def subresource_for(resource: str) -> str:
    """`<kind>/<subresource>` with the kind's plural for any of its names ("p/log" → "projects/log"); KeyError
    naming the known subresources when it is none of them."""
    base, _, sub = resource.partition("/")
    wanted = f"{kind_for(base).plural}/{sub.lower()}"
    if wanted not in SUBRESOURCES:
        raise KeyError(f"unknown subresource {resource!r}; known: {', '.join(SUBRESOURCES)}")
    return wanted


def kind_of(obj: Message) -> Kind:
    """The Kind of a message instance (v1.Project → projects …; a registered custom class → its kind)."""
    return kind_of_class(type(obj))


def kind_of_class(cls: type[Any]) -> Kind:
    """The Kind whose message class is `cls`; TypeError naming what to do when it is not known."""
    found = _BY_CLASS.get(cls)
    if found is not None:
        return found
    raise TypeError(
        f"{cls.__name__} is not a known kind: define it (Client.define) or register it "
        "(caravanserai.customkinds.schemas.register) first"
    )


def kind_named(kind: str) -> Kind:
    """The Kind for an exact kind name ("Project"); KeyError otherwise."""
    return _BY_NAME[kind]


def wrap(obj: Message) -> v1.Object:
    """Put an object into the `v1.Object` envelope (copying it)."""
    return kind_of(obj).wrap(obj)


def unwrap(envelope: v1.Object) -> Any:
    """The object inside a `v1.Object` envelope (built-in kinds: the envelope's own sub-message, not a copy; custom
    kinds: decoded with the registered class)."""
    field = envelope.WhichOneof("object")
    if field is None:
        raise ValueError("empty object envelope")
    if field == "custom":
        return kind_named(envelope.custom.kind).unwrap(envelope)
    return getattr(envelope, field)


def with_type_meta(obj: T) -> T:
    """Set api_version and kind on `obj` (in place) and return it."""
    kind = kind_of_class(type(obj))
    obj.api_version = kind.api_version
    obj.kind = kind.kind
    return obj


def copy(obj: M) -> M:
    """A deep copy: cached objects are read-only, whoever writes copies first."""
    out = type(obj)()
    out.CopyFrom(obj)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Namespaces and object keys

DEFAULT_NAMESPACE = "default"
"""The namespace of a namespaced object that names none, and of everything stored before namespaces existed."""


def namespace_of(obj: Any) -> str:
    """`obj`'s namespace ("" for an object of a cluster-wide kind); `obj` is an object of any kind."""
    namespace: str = obj.metadata.namespace
    return namespace


def join_key(namespace: str, name: str) -> str:
    """The key of the object `name` in `namespace`: "namespace/name", or "name" for a cluster-wide object
    (`namespace` empty). Keys name objects in informers, work queues, the watch cache and the store."""
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str, str]:
    """(namespace, name) of a key made by `join_key` (namespace "" for a cluster-wide object's key)."""
    namespace, _, name = key.rpartition("/")
    return namespace, name


def key_of(obj: Any) -> str:
    """The key of `obj`, an object of any kind ("namespace/name", or "name" for an object of a cluster-wide kind)."""
    metadata = obj.metadata
    return join_key(metadata.namespace, metadata.name)


def shown(key: str) -> str:
    """How messages and pages name an object by its key: the bare name for one of `default` (they read as they did
    before namespaces existed) or of a cluster-wide kind, "namespace/name" otherwise."""
    namespace, name = split_key(key)
    return name if namespace in ("", DEFAULT_NAMESPACE) else key


def name_of(obj: Message) -> str:
    # Message declares no fields; every kind's message has metadata.name, a str.
    return obj.metadata.name  # type: ignore[attr-defined, no-any-return]  # Message declares no fields; every kind has metadata.name


# ---------------------------------------------------------------------------------------------------------------
# Owner references

PROPAGATION_BACKGROUND = "Background"
PROPAGATION_FOREGROUND = "Foreground"
PROPAGATION_ORPHAN = "Orphan"
PROPAGATION_POLICIES = (PROPAGATION_BACKGROUND, PROPAGATION_FOREGROUND, PROPAGATION_ORPHAN)
"""The values of `DeleteRequest.propagation_policy` (empty means Background), as Kubernetes spells them."""
FINALIZER_FOREGROUND = "foregroundDeletion"
"""Held by an owner deleted with the Foreground policy until its blocking dependents are gone."""
FINALIZER_ORPHAN = "orphan"
"""Held by an owner deleted with the Orphan policy until its dependents no longer reference it."""


def owner_reference(
    owner: Message, *, controller: bool = False, block_owner_deletion: bool = True
) -> v1.OwnerReference:
    """A reference to `owner` (an object as stored: it must have a uid) for a dependent's
    `metadata.owner_references`. `controller=True` marks the owner as the dependent's managing controller (at most
    one per dependent); `block_owner_deletion` makes a Foreground deletion of the owner wait for the dependent.

    ValueError when `owner` has no uid (it was never created) or is of an unknown kind."""
    metadata: v1.ObjectMeta = owner.metadata  # type: ignore[attr-defined]  # every kind's message has metadata
    if not metadata.uid:
        raise ValueError(f"{type(owner).__name__} {metadata.name!r} has no uid: reference an object as stored")
    kind = kind_of(owner)
    return v1.OwnerReference(
        api_version=kind.api_version,
        kind=kind.kind,
        name=metadata.name,
        uid=metadata.uid,
        controller=controller,
        block_owner_deletion=block_owner_deletion,
    )


def set_owner(obj: Message, owner: Message, *, controller: bool = False, block_owner_deletion: bool = True) -> None:
    """Make `owner` an owner of `obj` (in place): a reference to the same uid is replaced, otherwise one is added.

    ValueError when `controller=True` and `obj` already has another controller (Kubernetes'
    SetControllerReference refuses that too)."""
    ref = owner_reference(owner, controller=controller, block_owner_deletion=block_owner_deletion)
    refs = obj.metadata.owner_references  # type: ignore[attr-defined]  # every kind's message has metadata
    current = controller_of(obj)
    if controller and current is not None and current.uid != ref.uid:
        raise ValueError(
            f"{name_of(obj)!r} is already controlled by {current.kind} {current.name!r}: "
            "metadata.ownerReferences may hold one controller"
        )
    for existing in refs:
        if existing.uid == ref.uid:
            existing.CopyFrom(ref)
            return
    refs.append(ref)


def controller_of(obj: Message) -> v1.OwnerReference | None:
    """The owner reference with controller=true of `obj`, or None."""
    for ref in obj.metadata.owner_references:  # type: ignore[attr-defined]  # every kind's message has metadata
        if ref.controller:
            return ref  # type: ignore[no-any-return]  # a v1.OwnerReference
    return None


def is_owned_by(obj: Message, owner: Message) -> bool:
    """True when one of `obj`'s owner references names `owner`'s uid (not merely its name: a recreated owner is
    another object)."""
    uid = owner.metadata.uid  # type: ignore[attr-defined]  # every kind's message has metadata
    return bool(uid) and any(ref.uid == uid for ref in obj.metadata.owner_references)  # type: ignore[attr-defined]  # every kind has metadata


def remove_owner(obj: Message, uid: str) -> bool:
    """Drop the owner references to `uid` from `obj` (in place); True when one was removed."""
    refs = obj.metadata.owner_references  # type: ignore[attr-defined]  # every kind's message has metadata
    keep = [ref for ref in refs if ref.uid != uid]
    if len(keep) == len(refs):
        return False
    del refs[:]
    refs.extend(keep)
    return True


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
        existing = conditions.add()  # type: ignore[attr-defined]  # a repeated message field has add(); typed as a MutableSequence
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
    """Change a project's phase and record it in the `Phase` condition, as every phase change must. The building
    block of `caravanserai.project.lifecycle`'s constructors; writers call those, not this."""
    project.status.phase = phase
    set_condition(project.status.conditions, v1.CONDITION_PHASE, v1.TRUE, reason=reason, message=message, now=now)


__all__ = [
    "DEFAULT_NAMESPACE",
    "FINALIZER_FOREGROUND",
    "FINALIZER_ORPHAN",
    "KINDS",
    "Kind",
    "PROPAGATION_BACKGROUND",
    "PROPAGATION_FOREGROUND",
    "PROPAGATION_ORPHAN",
    "PROPAGATION_POLICIES",
    "Resource",
    "SUBRESOURCES",
    "controller_of",
    "copy",
    "get_condition",
    "is_owned_by",
    "join_key",
    "key_of",
    "kind_for",
    "kind_named",
    "kind_of",
    "kind_of_class",
    "name_of",
    "namespace_of",
    "owner_reference",
    "register",
    "registered",
    "remove_condition",
    "remove_owner",
    "set_condition",
    "set_owner",
    "set_phase",
    "shown",
    "split_key",
    "subresource_for",
    "unwrap",
    "with_type_meta",
    "wrap",
]
