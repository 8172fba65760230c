"""`caractrl wait`: block until objects reach a state, watching (not polling) and surviving apiserver restarts.

    caractrl wait project web --for phase=Running
    caractrl wait project web --for condition=Ready --timeout 2m
    caractrl wait node n1 --for state=Ready
    caractrl wait project web --for delete
    caractrl wait backup nightly --for phase=Done             # a custom kind: a field of its status
    caractrl wait backup nightly --for jsonpath='{.status.phase}'=Done

Several `--for` must all hold (kubectl ANDs them). On a custom kind `FIELD=VALUE` compares `status.FIELD` (its
JSON name, any case; an enum by its value name, the zero value included); `jsonpath=TEMPLATE=VALUE` compares what
the template prints for the object (`-o jsonpath`), exactly, and `jsonpath=TEMPLATE` waits until it prints
anything. `condition=Type` means status True; `condition=Type=False`
compares case-insensitively. Prints `project/web condition met`; on timeout prints
`error: timed out waiting for the condition on projects/web` and exits 1. A project that ends up Failed or
Terminated while waiting for another phase is reported at once instead of waiting for the timeout.

What a kind offers (`FIELD=VALUE` fields, when waiting is hopeless, whether `wait` takes it at all) is in its
entry of the CLI's kind table (`cli/kinds/`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

import click

from caravanserai import meta, v1
from caravanserai.cli import jsonpath
from caravanserai.cli.common import complete_names, complete_resource, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError, not_found
from caravanserai.cli.kinds import plurals, view_of
from caravanserai.cli.kinds.base import Condition, Predicate
from caravanserai.cli.printers import object_dict
from caravanserai.cli.resources import CUSTOM_KINDS, parse_target
from caravanserai.cli.scope import scoped
from caravanserai.cli.watching import Selection, SelectionWatch
from caravanserai.client import ResourceClient
from caravanserai.text.durations import parse_duration

WAITABLE = (*plurals(lambda view: view.waitable), CUSTOM_KINDS)
DEFAULT_TIMEOUT = "30s"


def parse_condition(text: str, kind: meta.Kind) -> Condition:
    """`delete`, `condition=Type[=value]` or `FIELD=VALUE` on one of the kind's wait fields (`phase=Running` for
    projects, `state=Ready` for nodes)."""
    what, _, value = text.partition("=")
    what = what.strip().lower()
    if what == "delete" and not value:
        return Condition(text, lambda obj: obj is None, wants_absent=True)
    fields = view_of(kind).wait_fields
    read = fields.get(what)
    if read is not None and value:
        return Condition(
            text, lambda obj: obj is not None and read(obj).lower() == value.lower(), field=what, value=value
        )
    if what == "condition" and value:
        type_, _, status = value.partition("=")
        return Condition(text, _has_condition(type_, status or v1.TRUE))
    if what == "jsonpath" and value:
        return Condition(text, _jsonpath_is(*_template_and_value(text, value)))
    if kind.custom and value and what:
        return Condition(text, _status_field_is(what, value), field=what, value=value)
    hint = "".join(f" or {name}={name.upper()}" for name in fields)
    hint += " or FIELD=VALUE (a field of status)" if kind.custom else ""
    raise click.BadParameter(
        f"{text!r}: use delete, condition=TYPE[=STATUS], jsonpath=TEMPLATE[=VALUE]{hint}", param_hint="'--for'"
    )


def _template_and_value(text: str, spec: str) -> tuple[str, str | None]:
    """(template, wanted value or None) of `jsonpath=…`: `{.status.phase}=Done`, `.status.phase=Done`,
    `{.status.phase}`."""
    if spec.startswith("{"):
        close = spec.find("}")
        template, rest = spec[: close + 1], spec[close + 1 :]
    else:
        path, sep, rest = spec.partition("=")
        template, rest = "{" + path + "}", sep + rest
    if rest and not rest.startswith("="):
        raise click.BadParameter(f"{text!r}: use jsonpath=TEMPLATE[=VALUE]", param_hint="'--for'")
    try:
        jsonpath.render(template, {})
    except jsonpath.JsonPathError as exc:
        raise click.BadParameter(f"{text!r}: {exc}", param_hint="'--for'") from None
    return template, (rest[1:] if rest else None)


def _jsonpath_is(template: str, wanted: str | None) -> Predicate:
    def test(obj: Any) -> bool:
        if obj is None:
            return False
        got = jsonpath.render(template, object_dict(obj))
        return got == wanted if wanted is not None else got != ""

    return test


def _status_field_is(name: str, wanted: str) -> Predicate:
    def test(obj: Any) -> bool:
        if obj is None:
            return False
        status = object_dict(obj).get("status", {})
        found = next((v for k, v in status.items() if k.lower() == name), None)
        return found is not None and not isinstance(found, (dict, list)) and str(found).lower() == wanted.lower()

    return test


def _has_condition(type_: str, status: str) -> Predicate:
    def test(obj: Any) -> bool:
        if obj is None:
            return False
        conditions = getattr(obj.status, "conditions", ())  # a custom kind's status may have none
        cond = next((c for c in conditions if c.type.lower() == type_.lower()), None)
        return cond is not None and cond.status.lower() == status.lower()

    return test


def hopeless(obj: Any, conditions: Sequence[Condition]) -> str | None:
    """Why waiting is pointless (as the kind's `hopeless` says: a project reached a final phase the conditions do
    not ask for), or None."""
    if obj is None:
        return None
    judge = view_of(meta.kind_of(obj)).hopeless
    return judge(obj, conditions) if judge is not None else None


async def wait_for_object(
    resources: ResourceClient[Any], name: str, conditions: Sequence[Condition], *, must_exist: bool
) -> None:
    """Return once every condition holds for `name` (watching); raise CommandError when that cannot happen."""
    async with SelectionWatch(resources, Selection(field_selector=f"metadata.name={name}")) as watcher:
        items = await watcher.list_current()
        current = items[0] if items else None
        if current is None and must_exist:
            raise not_found(resources.resource, name)
        if _check(current, conditions):
            return
        async with aclosing(watcher.events()) as events:
            async for event in events:
                current = None if event.type == v1.DELETED else event.object
                if _check(current, conditions):
                    return


def _check(obj: Any, conditions: Sequence[Condition]) -> bool:
    reason = hopeless(obj, conditions)
    if reason is not None:
        raise CommandError(f"error: {reason}")
    return all(c.test(obj) for c in conditions)


async def wait_all(
    resources: ResourceClient[Any], names: Sequence[str], conditions: Sequence[Condition], *, timeout: float
) -> list[str]:
    """Wait for every name (concurrently); return the names that did not get there within `timeout`."""
    must_exist = not any(c.wants_absent for c in conditions)

    async def one(name: str) -> str | None:
        try:
            async with asyncio.timeout(timeout if timeout > 0 else None):
                await wait_for_object(resources, name, conditions, must_exist=must_exist)
        except TimeoutError:
            return name
        return None

    results = await asyncio.gather(*(one(n) for n in names))
    return [n for n in results if n is not None]


def timeout_message(plural: str, names: Sequence[str]) -> str:
    return "; ".join(f"error: timed out waiting for the condition on {plural}/{n}" for n in names)


@click.command("wait")
@click.argument("resource", shell_complete=complete_resource)
@click.argument("names", nargs=-1, required=True, shell_complete=complete_names)
@click.option(
    "--for",
    "for_",
    multiple=True,
    required=True,
    metavar="CONDITION",
    help="delete | phase=PHASE | state=STATE | condition=TYPE[=STATUS] | jsonpath=TEMPLATE[=VALUE] | FIELD=VALUE "
    "(custom kinds: a field of status); repeat to require several.",
)
@click.option("--timeout", default=DEFAULT_TIMEOUT, show_default=True, help="Give up after this long (0: never).")
@pass_settings
def wait(settings: Settings, resource: str, names: Sequence[str], for_: Sequence[str], timeout: str) -> None:
    """Wait until projects, nodes or objects of custom kinds meet a condition."""
    kind, wanted = parse_target(resource, names, allowed=WAITABLE)
    conditions = [parse_condition(text, kind) for text in for_]
    try:
        seconds = parse_duration(timeout)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timeout'") from None
    run(_wait(settings, kind, wanted, conditions, seconds))


async def _wait(
    settings: Settings, kind: meta.Kind, names: list[str], conditions: list[Condition], timeout: float
) -> None:
    async with settings.client() as client:
        late = await wait_all(scoped(client, kind), names, conditions, timeout=timeout)
    for name in names:
        if name not in late:
            click.echo(f"{kind.kind.lower()}/{name} condition met")
    if late:
        raise CommandError(timeout_message(kind.plural, late))


__all__ = [
    "DEFAULT_TIMEOUT",
    "WAITABLE",
    "Condition",
    "Predicate",
    "hopeless",
    "parse_condition",
    "timeout_message",
    "wait",
    "wait_all",
    "wait_for_object",
]
