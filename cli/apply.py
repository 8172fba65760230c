"""`caractrl apply -f FILE|DIR|-`: create or update projects and nodes from manifests, kubectl-style.

    caractrl apply -f web.yaml -f nodes/          # repeatable; directories read *.yaml, *.yml, *.json by name
    cat web.yaml | caractrl apply -f -

Per object it prints `project/web created`, `project/web configured` or `project/web unchanged`.

How an update is computed (kubectl's client-side apply, at the granularity of top-level spec fields):

* The manifest as applied is remembered in the annotation `caravanserai.io/last-applied-configuration`.
* Labels and annotations of the manifest are set; keys the previous apply set and the manifest no longer has
  are removed; keys set by others (an agent's labels on its Node) are kept.
* Each top-level spec field the manifest sets replaces the live one; a field the previous apply set and the
  manifest dropped is cleared; other fields keep their live value — so a Node manifest does not clear the
  hostname its agent registered, nor uncordon a cordoned node.
* A Node's status is never written (apply uses Update, which changes metadata and spec only).
* The write carries the version read; on Conflict the object is read again and the merge redone.
* `unchanged` means spec, labels and annotations already equal the merged result: nothing is written.

A document that cannot be read or is refused is reported (file, document, field path) and the others are
still applied; the exit status is then 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import click
from google.protobuf.message import Message

from caravanserai import manifest, meta
from caravanserai.client import Client, ResourceClient
from caravanserai.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound, Unavailable

from caravanserai.cli.common import output_option, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError, PartialFailure, invalid, one_line, reason, report
from caravanserai.cli.manifests import Document, manifest_sources, read_manifests
from caravanserai.cli.printers import render_objects, resource_name
from caravanserai.cli.resources import CONFLICT_RETRIES

LAST_APPLIED = "caravanserai.io/last-applied-configuration"
APPLICABLE = ("nodes", "projects")
CREATED, CONFIGURED, UNCHANGED = "created", "configured", "unchanged"


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome for one object."""

    object: Any
    action: str


def applied_form(obj: Any) -> Any:
    """What apply declares of `obj`: name, labels, annotations and spec (never status or server fields)."""
    out = meta.with_type_meta(type(obj)())
    out.metadata.name = obj.metadata.name
    out.metadata.labels.update(obj.metadata.labels)
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


def merged(live: Any, declared: Any) -> Any:
    """The object to store: `live` with the manifest `declared` merged in, and the new last-applied annotation."""
    previous = previous_configuration(live)
    previous_meta = previous.get("metadata", {}) if isinstance(previous.get("metadata"), dict) else {}
    out = meta.copy(live)
    merge_map(out.metadata.labels, declared.metadata.labels, previous_meta.get("labels") or {})
    merge_map(out.metadata.annotations, declared.metadata.annotations, previous_meta.get("annotations") or {})
    out.metadata.annotations[LAST_APPLIED] = configuration(declared)
    spec_before: dict[str, Any] = previous["spec"] if isinstance(previous.get("spec"), dict) else {}
    merge_spec(out.spec, declared.spec, spec_before)
    return out


def same(a: Any, b: Any) -> bool:
    """Whether spec, labels and annotations are equal (what apply may change)."""
    return bool(
        a.spec == b.spec and a.metadata.labels == b.metadata.labels and a.metadata.annotations == b.metadata.annotations
    )


async def apply_object(client: Client, obj: Any, *, dry_run: bool = False) -> Applied:
    """Create or update one object; Conflict and create races are retried with a fresh read."""
    resources = client.resource(meta.kind_of(obj).plural)
    declared = applied_form(obj)
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
        live = await resources.get(declared.metadata.name)
    except NotFound:
        new = meta.copy(declared)
        new.metadata.annotations[LAST_APPLIED] = configuration(declared)
        return Applied(new if dry_run else await resources.create(new), CREATED)
    wanted = merged(live, declared)
    if same(wanted, live):
        return Applied(live, UNCHANGED)
    return Applied(wanted if dry_run else await resources.update(wanted), CONFIGURED)


def failure_line(doc: Document, exc: ApiError) -> str:
    """`Error from server (Invalid): web.yaml, document 2: project "web" is invalid: spec…: is required`."""
    kind = meta.kind_of(doc.object).kind
    message = invalid(kind, meta.name_of(doc.object), exc) if isinstance(exc, Invalid) else exc.message
    return one_line(f"Error from server ({reason(exc)}): {doc.origin}: {message}")


async def apply_documents(client: Client, documents: Sequence[Document], *, dry_run: bool) -> tuple[list[Applied], bool]:
    """Apply each document in order; report failures and go on. Returns (outcomes, failed)."""
    outcomes: list[Applied] = []
    failed = False
    for doc in documents:
        kind = meta.kind_of(doc.object)
        if kind.plural not in APPLICABLE:
            report(ValueError(f"{doc.origin}: kind {kind.kind} cannot be applied (only Project and Node)"))
            failed = True
            continue
        try:
            outcomes.append(await apply_object(client, doc.object, dry_run=dry_run))
        except Unavailable:
            raise
        except ApiError as exc:
            click.echo(failure_line(doc, exc), err=True)
            failed = True
    return outcomes, failed


@click.command("apply")
@click.option("-f", "--filename", "filenames", multiple=True, required=True, metavar="FILE|DIR|-",
              help="Manifest file, directory of manifests, or - for stdin (repeatable).")
@output_option()
@click.option("--dry-run", is_flag=True, help="Show what would happen without writing anything.")
@pass_settings
def apply(settings: Settings, filenames: Sequence[str], output: str | None, dry_run: bool) -> None:
    """Create or update projects and nodes from YAML or JSON manifests."""
    run(_apply(settings, filenames, settings.output_format(output).lower(), dry_run))


async def _apply(settings: Settings, filenames: Sequence[str], fmt: str, dry_run: bool) -> None:
    documents, failed = read_manifests(manifest_sources(filenames))
    if not documents and not failed:
        raise CommandError("error: no objects passed to apply")
    outcomes: list[Applied] = []
    if documents:
        async with settings.client() as client:
            outcomes, refused = await apply_documents(client, documents, dry_run=dry_run)
        failed = failed or refused
    _print(outcomes, fmt, dry_run=dry_run)
    if failed:
        raise PartialFailure()


def _print(outcomes: Sequence[Applied], fmt: str, *, dry_run: bool) -> None:
    if fmt in ("table", "wide"):
        suffix = " (dry run)" if dry_run else ""
        for outcome in outcomes:
            click.echo(f"{resource_name(outcome.object)} {outcome.action}{suffix}")
    elif outcomes:
        click.echo(render_objects([o.object for o in outcomes], fmt, single=len(outcomes) == 1), nl=False)


__all__ = ["APPLICABLE", "LAST_APPLIED", "Applied", "apply", "apply_documents", "apply_object", "merged"]
