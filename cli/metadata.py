"""`caractrl label` and `caractrl annotate`: set or remove labels and annotations, kubectl-style.

    caractrl label project web tier=front team=core        # add (an existing key needs --overwrite)
    caractrl label project/web tier=back --overwrite        # change a value
    caractrl annotate node n1 example.com/owner-            # `key-` removes the key
    caractrl label projects -l app=web canary=true          # every object the selector matches

Each object is read, changed and written with the version read; on Conflict it is read again and the change
redone (the change is by key, so it applies to whatever the object holds now). Prints `project/web labeled`
(`annotated`), or `project/web not labeled` when nothing changed. A key that already has another value is
refused without `--overwrite` (`'tier' already has a value (front), and --overwrite is false`); keys and values
the server refuses are reported with their field path.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

from caravanserai import meta
from caravanserai.cli.common import complete_names, complete_resource, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import PartialFailure, invalid, one_line, report
from caravanserai.cli.resources import modify, parse_target
from caravanserai.cli.scope import scoped
from caravanserai.client import Client
from caravanserai.errors import CaravanseraiError, Invalid


@dataclass(frozen=True, slots=True)
class Changes:
    """What to do to one map: keys to set and keys to remove."""

    set: dict[str, str]
    remove: tuple[str, ...]


def parse_changes(arguments: Sequence[str], what: str) -> tuple[list[str], Changes]:
    """Split `NAME… KEY=VALUE… KEY-…` into the names and the changes; a usage error when there are none."""
    names: list[str] = []
    to_set: dict[str, str] = {}
    to_remove: list[str] = []
    for argument in arguments:
        key, sep, value = argument.partition("=")
        if sep:
            if not key:
                raise click.UsageError(f"invalid {what} {argument!r}: the key is empty")
            to_set[key] = value
        elif argument.endswith("-") and len(argument) > 1:
            to_remove.append(argument[:-1])
        elif to_set or to_remove:
            raise click.UsageError(f"{argument!r}: names must come before the {what}s (KEY=VALUE or KEY-)")
        else:
            names.append(argument)
    both = sorted(set(to_set) & set(to_remove))
    if both:
        raise click.UsageError(f"can not both modify and remove the {what} {both[0]!r} in the same command")
    if not to_set and not to_remove:
        raise click.UsageError(f"at least one {what} update is required (KEY=VALUE or KEY-)")
    return names, Changes(to_set, tuple(to_remove))


def change(mapping: MutableMapping[str, str], changes: Changes, *, overwrite: bool) -> bool:
    """Apply `changes` to `mapping` in place; whether anything changed. ValueError for a value that would be
    replaced without `overwrite`."""
    for key, value in changes.set.items():
        if key in mapping and mapping[key] != value and not overwrite:
            raise ValueError(f"{key!r} already has a value ({mapping[key]}), and --overwrite is false")
    before = dict(mapping)
    for key in changes.remove:
        mapping.pop(key, None)
    mapping.update(changes.set)
    return dict(mapping) != before


@dataclass(frozen=True, slots=True)
class Verb:
    """`label` or `annotate`: which map it changes and how it reports."""

    name: str  # "label"
    done: str  # "labeled"
    field: Callable[[Any], MutableMapping[str, str]]


LABEL = Verb("label", "labeled", lambda obj: obj.metadata.labels)
ANNOTATE = Verb("annotate", "annotated", lambda obj: obj.metadata.annotations)


async def _names(client: Client, kind: meta.Kind, names: list[str], selector: str) -> list[str]:
    if selector:
        return sorted(o.metadata.name for o in await scoped(client, kind).list(label_selector=selector))
    return names


async def _change_all(
    settings: Settings, verb: Verb, kind: meta.Kind, names: list[str], selector: str, changes: Changes, overwrite: bool
) -> None:
    failed = False
    async with settings.client() as client:
        for name in await _names(client, kind, names, selector):
            try:
                _, changed = await modify(
                    scoped(client, kind),
                    name,
                    lambda obj: change(verb.field(obj), changes, overwrite=overwrite),
                )
            except Invalid as exc:
                click.echo(one_line(f"Error from server (Invalid): {invalid(kind.kind, name, exc)}"), err=True)
                failed = True
                continue
            except (CaravanseraiError, ValueError) as exc:
                report(exc)
                failed = True
                continue
            click.echo(f"{kind.kind.lower()}/{name} {verb.done if changed else 'not ' + verb.done}")
    if failed:
        raise PartialFailure()


def _command(verb: Verb, summary: str) -> click.Command:
    @click.command(verb.name, help=summary)
    @click.argument("resource", shell_complete=complete_resource)
    @click.argument(
        "arguments", nargs=-1, required=True, metavar="[NAME…] KEY=VALUE… KEY-…", shell_complete=complete_names
    )
    @click.option("--overwrite", is_flag=True, help="Allow replacing the value of an existing key.")
    @click.option("-l", "--selector", default="", help="Change every object matching this label selector.")
    @pass_settings
    def command(settings: Settings, resource: str, arguments: Sequence[str], overwrite: bool, selector: str) -> None:
        names, changes = parse_changes(arguments, verb.name)
        kind, names = parse_target(resource, names)
        if bool(names) == bool(selector):
            raise click.UsageError("give either NAMEs or --selector")
        run(_change_all(settings, verb, kind, names, selector, changes, overwrite))

    return command


label = _command(LABEL, "Set (KEY=VALUE) or remove (KEY-) labels of objects.")
annotate = _command(ANNOTATE, "Set (KEY=VALUE) or remove (KEY-) annotations of objects.")

__all__ = ["ANNOTATE", "LABEL", "Changes", "annotate", "change", "label", "parse_changes"]
