"""`caractrl auth can-i VERB KIND [NAME] [-n NS] [--as USER] [--as-group G]`: whether you (or, for an admin, another
user) may do something, answered by the apiserver's own authorizer (`Authorize`), as `kubectl auth can-i`.

Prints `yes` or `no` and the reason (the binding that allows it, or what is missing); exits 0 for yes, 1 for no.
With `-A` the question is about every namespace.
"""

from __future__ import annotations

import sys

import click

from caravanserai import meta
from caravanserai.cli.common import pass_settings, run
from caravanserai.cli.config import Settings

VERBS = ("get", "list", "watch", "create", "update", "update_status", "delete")


@click.group("auth")
def auth() -> None:
    """Inspect authorization."""


@auth.command("can-i")
@click.argument("verb", type=click.Choice(VERBS))
@click.argument("kind")
@click.argument("name", required=False, default="")
@click.option("--as", "as_user", default="", help="Ask for this user (only an admin may).")
@click.option("--as-group", "as_groups", multiple=True, help="A group of the --as user (repeatable).")
@pass_settings
def can_i(settings: Settings, verb: str, kind: str, name: str, as_user: str, as_groups: tuple[str, ...]) -> None:
    """May I do VERB on KIND (a plural, singular or short name, or projects/log, projects/exec,
    projects/portforward) in the namespace (-n, or every one with -A)?"""
    try:
        plural = meta.subresource_for(kind) if "/" in kind else meta.kind_for(kind).plural
    except KeyError as exc:
        raise click.BadParameter(str(exc.args[0]), param_hint="KIND") from None
    if as_groups and not as_user:
        raise click.UsageError("--as-group needs --as USER")
    answer = run(_ask(settings, verb, plural, name, as_user, as_groups))
    click.echo(("yes" if answer[0] else "no") + (f" ({answer[1]})" if answer[1] else ""))
    if not answer[0]:
        sys.exit(1)


async def _ask(
    settings: Settings, verb: str, plural: str, name: str, user: str, groups: tuple[str, ...]
) -> tuple[bool, str]:
    async with settings.client() as client:
        namespace = "" if settings.all_namespaces else None
        response = await client.can_i(verb, plural, namespace=namespace, name=name, user=user, groups=groups)
    return response.allowed, response.reason


__all__ = ["auth", "can_i"]
