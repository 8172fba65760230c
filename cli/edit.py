"""`caractrl edit RESOURCE NAME`: change an object in your editor; it is applied when the editor exits.

    EDITOR=nano caractrl edit project web

The object is written as YAML (as `get -o yaml` prints it) to a temporary file and `$CARA_EDITOR`, else
`$EDITOR`, else `vi` is run on it. After the editor exits:

* an unchanged file: `Edit cancelled, no changes made.` (nothing written, the file removed);
* otherwise the file is read like a manifest and written with Update (labels, annotations, finalizers, spec)
  at the version that was read: `project/web edited`. Someone else's write in between is a Conflict, not lost.
* When the file cannot be read, changes a read-only field (status, uid, name, …), or the server refuses it, the
  error is printed (one line) with the field path and the edited file is kept — the line ends with `(the edited
  file was kept: PATH)` — so nothing typed is lost; the exit status is 1.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import click

from caravanserai import meta
from caravanserai.cli.common import complete_names, complete_resource, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.edits import check_read_only, to_update, unchanged
from caravanserai.cli.errors import CommandError, describe_error, invalid, one_line
from caravanserai.cli.printers import object_dict, render_data, resource_name
from caravanserai.cli.resources import get_object, parse_target
from caravanserai.errors import ApiError, Invalid
from caravanserai.text import manifest

CANCELLED = "Edit cancelled, no changes made."


def editor_command() -> list[str]:
    """The editor to run: $CARA_EDITOR, else $EDITOR, else vi (split like a shell would)."""
    return shlex.split(os.environ.get("CARA_EDITOR") or os.environ.get("EDITOR") or "vi")


def run_editor(path: Path) -> None:
    """Run the editor on `path` and wait for it; an OSError or ValueError when it cannot run or fails."""
    command = editor_command()
    status = subprocess.run([*command, str(path)], check=False).returncode
    if status != 0:
        raise ValueError(f"the editor {command[0]!r} exited with status {status}")


def edited_object(live: Any, path: Path) -> Any:
    """The object to Update from the edited file; Invalid naming the fields (file and document included)."""
    objects = manifest.load_manifests(path.read_text(encoding="utf-8"), source=str(path))
    if len(objects) != 1:
        raise ValueError(f"{path}: expected the one object that was opened, found {len(objects)}")
    edited = objects[0]
    check_read_only(object_dict(live), object_dict(edited), what=meta.kind_of(live).kind)
    return to_update(live, edited)


async def _read(settings: Settings, kind: meta.Kind, name: str) -> Any:
    async with settings.client() as client:
        return await get_object(client.resource(kind.plural), name)


async def _write(settings: Settings, wanted: Any) -> Any:
    async with settings.client() as client:
        return await client.resource(meta.kind_of(wanted).plural).update(wanted)


def _local_refusal(kind: str, name: str, exc: Exception) -> str:
    """The line for a problem found before writing: the file's own (file, document, field path) or a read-only
    field changed."""
    if isinstance(exc, Invalid) and exc.message.startswith("invalid "):
        return f"error: {invalid(kind, name, exc)}"
    if isinstance(exc, Invalid):
        return f"error: {exc.message}"
    return describe_error(exc)


def _server_refusal(kind: str, name: str, exc: ApiError) -> str:
    if isinstance(exc, Invalid):
        return f"Error from server (Invalid): {invalid(kind, name, exc)}"
    return describe_error(exc)


def _kept(line: str, path: Path) -> CommandError:
    return CommandError(f"{one_line(line)} (the edited file was kept: {path})")


def edit_file(settings: Settings, live: Any, path: Path) -> str:
    """Edit `path` (holding `live`) and write the result; the line to print. CommandError keeps the file."""
    original = path.read_text(encoding="utf-8")
    run_editor(path)
    if path.read_text(encoding="utf-8") == original:
        path.unlink()
        return CANCELLED
    kind, name = meta.kind_of(live).kind, meta.name_of(live)
    try:
        wanted = edited_object(live, path)
    except (Invalid, ValueError, OSError) as exc:
        raise _kept(_local_refusal(kind, name, exc), path) from None
    if not unchanged(live, wanted) or wanted.metadata.resource_version != live.metadata.resource_version:
        try:
            run(_write(settings, wanted))
        except ApiError as exc:
            raise _kept(_server_refusal(kind, name, exc), path) from None
    path.unlink()
    return f"{resource_name(live)} edited"


@click.command("edit")
@click.argument("resource", shell_complete=complete_resource)
@click.argument("name", required=False, shell_complete=complete_names)
@pass_settings
def edit(settings: Settings, resource: str, name: str | None) -> None:
    """Edit an object in $CARA_EDITOR or $EDITOR (default vi); it is applied when the editor exits."""
    kind, names = parse_target(resource, [name] if name else [])
    if len(names) != 1:
        raise click.UsageError("edit needs exactly one object: RESOURCE NAME or RESOURCE/NAME")
    live = run(_read(settings, kind, names[0]))
    handle, filename = tempfile.mkstemp(prefix=f"caractrl-edit-{kind.kind.lower()}-{names[0]}-", suffix=".yaml")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(render_data(object_dict(live), "yaml"))
    click.echo(edit_file(settings, live, Path(filename)))


__all__ = ["CANCELLED", "edit", "edit_file", "edited_object", "editor_command"]
