"""`caractrl patch RESOURCE NAME -p PATCH`: change an object with a JSON merge patch (RFC 7386).

    caractrl patch project web -p '{"spec": {"priority": 10}}'
    caractrl patch node/n1 -p '{"metadata": {"labels": {"zone": "b", "old": null}}}'    # null removes

The patch is merged into the object's manifest form (as `get -o json` prints it): objects merge key by key,
`null` removes a key, anything else replaces the value (lists are replaced whole). The result is checked like a
manifest (unknown fields and bad values are refused with their field path) and written with Update: labels,
annotations, finalizers and spec. A patch that touches a read-only field (status, uid, name, …) is refused
naming it. Without `metadata.resourceVersion` in the patch, a Conflict re-reads the object and merges the patch
again; with it, that version is a precondition. Prints `project/web patched` or `project/web patched (no
change)`.
"""

from __future__ import annotations

import json
from typing import Any

import click

from caravanserai import meta
from caravanserai.cli.common import complete_names, complete_resource, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.edits import check_read_only, to_update, unchanged
from caravanserai.cli.errors import CommandError, invalid, one_line
from caravanserai.cli.printers import object_dict
from caravanserai.cli.resources import modify, parse_target
from caravanserai.errors import Invalid
from caravanserai.text.protojson import from_data


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `target` with the JSON merge patch `patch` applied (neither is changed)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def parse_patch(text: str) -> dict[str, Any]:
    """The patch document: a JSON object, else a usage error saying why."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="'-p'") from None
    if not isinstance(data, dict):
        raise click.BadParameter("a merge patch must be a JSON object", param_hint="'-p'")
    return data


def patched(live: Any, patch: dict[str, Any]) -> Any:
    """The object to Update after merging `patch` into `live`; Invalid naming refused fields."""
    before = object_dict(live)
    after = merge_patch(before, patch)
    kind = meta.kind_of(live).kind
    check_read_only(before, after, what=kind)
    edited = from_data(after, type(live))
    return to_update(live, edited)


def _apply(patch: dict[str, Any]) -> Any:
    def mutate(obj: Any) -> bool:
        wanted = patched(obj, patch)
        if unchanged(obj, wanted) and wanted.metadata.resource_version == obj.metadata.resource_version:
            return False
        obj.CopyFrom(wanted)
        return True

    return mutate


async def _patch(settings: Settings, kind: meta.Kind, name: str, patch: dict[str, Any]) -> bool:
    async with settings.client() as client:
        try:
            _, changed = await modify(client.resource(kind.plural), name, _apply(patch))
        except Invalid as exc:
            raise CommandError(one_line(f"Error from server (Invalid): {invalid(kind.kind, name, exc)}")) from None
        return changed


@click.command("patch")
@click.argument("resource", shell_complete=complete_resource)
@click.argument("name", required=False, shell_complete=complete_names)
@click.option("-p", "--patch", "patch_text", required=True, metavar="JSON", help="The JSON merge patch.")
@click.option(
    "--type",
    "patch_type",
    type=click.Choice(["merge"]),
    default="merge",
    show_default=True,
    help="Patch format (JSON merge patch, RFC 7386).",
)
@pass_settings
def patch(settings: Settings, resource: str, name: str | None, patch_text: str, patch_type: str) -> None:
    """Change an object with a JSON merge patch of its manifest form."""
    kind, names = parse_target(resource, [name] if name else [])
    if len(names) != 1:
        raise click.UsageError("patch needs exactly one object: RESOURCE NAME or RESOURCE/NAME")
    changed = run(_patch(settings, kind, names[0], parse_patch(patch_text)))
    click.echo(f"{kind.kind.lower()}/{names[0]} patched" + ("" if changed else " (no change)"))


__all__ = ["merge_patch", "parse_patch", "patch", "patched"]
