"""Client-side writes shared by every client (caractrl, the dashboard): kubectl-style apply and read-modify-write.

How `apply_object` computes an update (kubectl's client-side apply, at the granularity of top-level spec fields):

* The manifest as applied is remembered in the annotation `caravanserai.io/last-applied-configuration`.
* Labels and annotations of the manifest are set; keys the previous apply set and the manifest no longer has
  are removed; keys set by others (an agent's labels on its Node) are kept. `metadata.finalizers` are merged the
  same way: the manifest's are added, those the previous apply added and the manifest dropped are removed,
  those added by others (a controller's) are kept. `metadata.ownerReferences` likewise, by uid: the manifest's are
  set, those the previous apply set and the manifest dropped are removed, those set by others are kept.
* Each top-level spec field the manifest sets replaces the live one; a field the previous apply set and the
  manifest dropped is cleared; other fields keep their live value. One exception inside a project's services:
  a service's `restartedAt` stamp (set by `caractrl restart`) is kept when the manifest does not set it and the
  previous apply did not either, so re-applying an unchanged manifest does not restart the service again.
* Status is never written (apply uses Update, which changes metadata and spec only).
* The write carries the version read; on Conflict (or a lost create race) the object is read again and the merge
  redone, up to `CONFLICT_RETRIES` times.
* `unchanged` means spec, labels, annotations and finalizers already equal the merged result: nothing is
  written.
* **What the merge removes is said** (`Applied.removed`, `removed_fields`): every label, annotation, finalizer,
  spec field, named list element (`spec.taints[dedicated]`) or map key the live object had and the update drops —
  whether the previous apply set it and this manifest does not, or this manifest replaces a list without it (a
  second Node manifest without the first one's taints).

`modify` is the read-modify-write loop of single-field changes (cordon): read, change a copy, write with the
version read, read again on Conflict; `modify_status` is the same loop over the status (UpdateStatus), for
writers that are not the reconcile of the object (an agent's background backups).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from caravanserai import meta
from caravanserai.client.client import Client, ResourceClient
from caravanserai.errors import AlreadyExists, Conflict, NotFound
from caravanserai.text import manifest

# How often a write that keeps meeting Conflict is re-read and retried before the Conflict is reported.
CONFLICT_RETRIES = 5
APPLICABLE = (
    "admissionpolicies",
    "backuprepositories",
    "configs",
    "namespaces",
    "nodegroups",
    "nodes",
    "projects",
    "projectsets",
    "resourcedefinitions",
    "secrets",
)
"""The built-in kinds a manifest may create or update (custom kinds may be applied too, see `applicable`)."""


def applicable(kind: meta.Kind) -> bool:
    """Whether manifests of `kind` may be applied: the built-in kinds of `APPLICABLE` and every custom kind."""
    return kind.plural in APPLICABLE or kind.custom


LAST_APPLIED = "caravanserai.io/last-applied-configuration"
CREATED, CONFIGURED, UNCHANGED = "created", "configured", "unchanged"


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome for one object."""

    object: Any
    action: str
    removed: tuple[str, ...] = ()  # what the merge removed from the live object (`removed_fields`)


def applied_form(obj: Any) -> Any:
    """What apply declares of `obj`: name, namespace, labels, annotations, finalizers, owner references and spec
    (never status or server fields)."""
    out = meta.with_type_meta(type(obj)())
    out.metadata.name = obj.metadata.name
    out.metadata.namespace = obj.metadata.namespace
    out.metadata.labels.update(obj.metadata.labels)
    out.metadata.finalizers.extend(obj.metadata.finalizers)
    out.metadata.owner_references.extend(obj.metadata.owner_references)
    out.metadata.annotations.update({k: v for k, v in obj.metadata.annotations.items() if k != LAST_APPLIED})
    out.spec.CopyFrom(obj.spec)
    return out


def configuration(declared: Any) -> str:
    """The canonical JSON stored in the last-applied annotation."""
    return json.dumps(manifest.to_dict(declared), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def previous_configuration(live: Any) -> dict[str, Any]:
    """The configuration the last apply stored on `live` ({} when there is none or it is unreadable)."""
    try:
        data = json.loads(live.metadata.annotations.get(LAST_APPLIED, "") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def merge_map(live: MutableMapping[str, str], declared: Mapping[str, str], previous: Mapping[str, Any]) -> None:
    """Set the declared keys; drop keys declared last time but not now; keep everyone else's."""
    for key in previous:
        if key not in declared:
            live.pop(key, None)
    live.update(declared)


def merge_list(live: MutableSequence[str], declared: Sequence[str], previous: Sequence[Any]) -> None:
    """Add the declared items (in order, after the live ones); drop items declared last time but not now; keep
    everyone else's."""
    kept = [item for item in live if item in declared or item not in previous]
    del live[:]
    live.extend(kept + [item for item in declared if item not in kept])


def merge_owners(live: Any, declared: Any, previous: Sequence[Any]) -> None:
    """`merge_list` for owner references, by uid: the declared ones set, those declared last time but not now
    dropped, everyone else's kept."""
    before = {item.get("uid") for item in previous if isinstance(item, dict)}
    wanted = {ref.uid: ref for ref in declared}
    out = []
    for ref in live:  # in the live order: an unchanged manifest changes nothing
        if ref.uid in wanted:
            out.append(wanted.pop(ref.uid))
        elif ref.uid not in before:
            out.append(ref)
    out.extend(wanted.values())
    copies = [type(ref)() for ref in out]
    for copy, ref in zip(copies, out, strict=True):
        copy.CopyFrom(ref)
    del live[:]
    live.extend(copies)


def copy_field(target: Message, source: Message, name: str) -> None:
    """Replace field `name` of `target` with that of `source` (any field type)."""
    target.ClearField(name)
    part = type(source)()
    part.CopyFrom(source)
    for field, _ in part.ListFields():
        if field.name != name:
            part.ClearField(field.name)
    target.MergeFrom(part)


def merge_spec(live: Message, declared: Message, previous: Mapping[str, Any]) -> None:
    """Top-level three-way merge of a spec: declared fields win, dropped ones are cleared, others kept."""
    declared_fields = manifest.to_dict(declared)
    for field in live.DESCRIPTOR.fields:
        if field.json_name in declared_fields:
            copy_field(live, declared, field.name)
        elif field.json_name in previous:
            live.ClearField(field.name)


def keep_restarts(merged_spec: Message, live_spec: Message, previous: Mapping[str, Any]) -> None:
    """Carry each live service's `restartedAt` over to the merged service of the same name, unless the manifest
    sets one or the previous apply did (then the manifest owns the field)."""
    live_stamps = {s.name: s.restarted_at for s in getattr(live_spec, "services", ()) if s.HasField("restarted_at")}
    if not live_stamps:
        return
    declared_before = previous.get("services")
    previous_services: list[Any] = declared_before if isinstance(declared_before, list) else []
    owned = {str(s.get("name")) for s in previous_services if isinstance(s, dict) and "restartedAt" in s}
    for service in merged_spec.services:  # type: ignore[attr-defined]  # reached only when live_spec has services, so merged_spec (same kind) has them
        stamp = live_stamps.get(service.name)
        if stamp is not None and not service.HasField("restarted_at") and service.name not in owned:
            service.restarted_at.CopyFrom(stamp)


def merged(live: Any, declared: Any) -> Any:
    """The object to store: `live` with the manifest `declared` merged in, and the new last-applied annotation."""
    previous = previous_configuration(live)
    previous_meta = previous.get("metadata", {}) if isinstance(previous.get("metadata"), dict) else {}
    out = meta.copy(live)
    merge_map(out.metadata.labels, declared.metadata.labels, previous_meta.get("labels") or {})
    merge_map(out.metadata.annotations, declared.metadata.annotations, previous_meta.get("annotations") or {})
    previous_finalizers = previous_meta.get("finalizers")
    merge_list(
        out.metadata.finalizers,
        declared.metadata.finalizers,
        previous_finalizers if isinstance(previous_finalizers, list) else [],
    )
    previous_owners = previous_meta.get("ownerReferences")
    merge_owners(
        out.metadata.owner_references,
        declared.metadata.owner_references,
        previous_owners if isinstance(previous_owners, list) else [],
    )
    out.metadata.annotations[LAST_APPLIED] = configuration(declared)
    spec_before: dict[str, Any] = previous["spec"] if isinstance(previous.get("spec"), dict) else {}
    merge_spec(out.spec, declared.spec, spec_before)
    keep_restarts(out.spec, live.spec, spec_before)
    return out


def removed_fields(live: Any, wanted: Any) -> tuple[str, ...]:
    """The paths of what `wanted` (the merge's result) drops from `live`: labels, annotations and finalizers
    (`metadata.labels[zone]`), and spec fields, an element of a list named by its `key` or `name`
    (`spec.taints[dedicated]`, `spec.services[worker]`) or a key of a map; a whole field when its elements have no
    name (`spec.nodeSelector`)."""
    lines = [f"metadata.labels[{k}]" for k in sorted(live.metadata.labels) if k not in wanted.metadata.labels]
    lines += [
        f"metadata.annotations[{k}]"
        for k in sorted(live.metadata.annotations)
        if k not in wanted.metadata.annotations and k != LAST_APPLIED
    ]
    lines += [f"metadata.finalizers[{f}]" for f in live.metadata.finalizers if f not in wanted.metadata.finalizers]
    owners = {ref.uid for ref in wanted.metadata.owner_references}
    lines += [
        f"metadata.ownerReferences[{ref.kind}/{ref.name}]"
        for ref in live.metadata.owner_references
        if ref.uid not in owners
    ]
    kept = {field.name: value for field, value in wanted.spec.ListFields()}
    for field, value in live.spec.ListFields():
        lines += _removed_in(f"spec.{field.json_name}", field, value, kept.get(field.name))
    return tuple(lines)


def _removed_in(path: str, field: Any, live: Any, wanted: Any) -> list[str]:
    """What of one spec field is gone in `wanted` (None: the whole field)."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return [f"{path}[{key}]" for key in sorted(live) if wanted is None or key not in wanted]
    if not field.is_repeated or field.message_type is None:
        return [path] if wanted is None else []  # else a value changed, not removed
    names = [_element_name(item) for item in live]
    if any(name is None for name in names):
        return [path] if wanted is None else []
    remaining = {_element_name(item) for item in wanted or ()}
    return [f"{path}[{name}]" for name in names if name not in remaining]


def _element_name(item: Message) -> str | None:
    for attribute in ("key", "name"):
        if attribute in item.DESCRIPTOR.fields_by_name:
            return str(getattr(item, attribute))
    return None


def same(a: Any, b: Any) -> bool:
    """Whether spec, labels, annotations, finalizers and owner references are equal (what apply may change)."""
    return bool(
        a.spec == b.spec
        and a.metadata.labels == b.metadata.labels
        and a.metadata.annotations == b.metadata.annotations
        and list(a.metadata.finalizers) == list(b.metadata.finalizers)
        and list(a.metadata.owner_references) == list(b.metadata.owner_references)
    )


async def apply_object(client: Client, obj: Any, *, dry_run: bool = False) -> Applied:
    """Create or update one object; Conflict and create races are retried with a fresh read. An object of a
    namespaced kind that names no namespace goes into the client's (`client.namespace`)."""
    kind = meta.kind_of(obj)
    resources = client.resource(kind.plural)
    declared = applied_form(obj)
    if not kind.cluster_scoped and not declared.metadata.namespace:
        declared.metadata.namespace = client.namespace
    attempt = 1
    while True:
        try:
            return await _apply_once(resources, declared, dry_run=dry_run)
        except (AlreadyExists, Conflict):
            if attempt == CONFLICT_RETRIES:
                raise
            attempt += 1


async def _apply_once(resources: ResourceClient[Any], declared: Any, *, dry_run: bool) -> Applied:
    """Read, merge, write once. AlreadyExists (lost a create race) and Conflict (stale read) mean: again."""
    try:
        live = await resources.get(declared.metadata.name if resources.kind.cluster_scoped else meta.key_of(declared))
    except NotFound:
        new = meta.copy(declared)
        new.metadata.annotations[LAST_APPLIED] = configuration(declared)
        return Applied(new if dry_run else await resources.create(new), CREATED)
    wanted = merged(live, declared)
    if same(wanted, live):
        return Applied(live, UNCHANGED)
    removed = removed_fields(live, wanted)
    return Applied(wanted if dry_run else await resources.update(wanted), CONFIGURED, removed)


async def modify(
    resources: ResourceClient[Any],
    name: str,
    mutate: Callable[[Any], bool | Awaitable[bool]],
    *,
    current: Any = None,
) -> tuple[Any, bool]:
    """Read `name`, let `mutate` change a copy of it in place, write it with its version; on Conflict read again.

    `mutate` returns False when nothing needs to change (then nothing is written). Returns (object, changed).
    NotFound when the object does not exist. `current`: a copy already read (a cache's), tried first instead of
    a read; a Conflict then reads afresh as usual.
    """
    return await _read_modify_write(resources, name, mutate, resources.update, current)


async def modify_status(
    resources: ResourceClient[Any],
    name: str,
    mutate: Callable[[Any], bool | Awaitable[bool]],
    *,
    current: Any = None,
) -> tuple[Any, bool]:
    """`modify` for the status: the changed copy is written with UpdateStatus (only its status is stored), on
    Conflict read again and `mutate` applied again (at most `CONFLICT_RETRIES` times). Returns (object, changed);
    NotFound when the object does not exist, the server's refusal (FailedPrecondition, Forbidden) as it comes."""
    return await _read_modify_write(resources, name, mutate, resources.update_status, current)


async def _read_modify_write(
    resources: ResourceClient[Any],
    name: str,
    mutate: Callable[[Any], bool | Awaitable[bool]],
    write: Callable[[Any], Awaitable[Any]],
    known: Any = None,
) -> tuple[Any, bool]:
    attempt = 1
    while True:
        current = known if known is not None else await resources.get(name)
        known = None  # after a Conflict: read afresh
        wanted = meta.copy(current)
        changed = mutate(wanted)
        if not isinstance(changed, bool):
            changed = await changed
        if not changed:
            return current, False
        try:
            return await write(wanted), True
        except Conflict:
            if attempt == CONFLICT_RETRIES:
                raise
            attempt += 1


__all__ = [
    "APPLICABLE",
    "Applied",
    "applicable",
    "CONFIGURED",
    "CONFLICT_RETRIES",
    "CREATED",
    "LAST_APPLIED",
    "UNCHANGED",
    "applied_form",
    "apply_object",
    "configuration",
    "merged",
    "modify",
    "modify_status",
    "same",
]
