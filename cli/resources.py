"""Resource arguments and the read-modify-write loop the verbs share.

Every verb takes kubectl's forms: `get projects`, `get project web db`, `get p`, `get project/web`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import click

from caravanserai import meta
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import as_command_error, not_found
from caravanserai.client import ResourceClient
from caravanserai.client import apply as client_apply
from caravanserai.client.apply import CONFLICT_RETRIES
from caravanserai.errors import CaravanseraiError, NotFound, Unavailable

CUSTOM_KINDS = "<custom kinds>"
"""In an `allowed` list: every custom kind is allowed too."""


def is_allowed(kind: meta.Kind, allowed: Sequence[str]) -> bool:
    """Whether a verb that takes `allowed` kinds takes `kind`."""
    return kind.plural in allowed or (kind.custom and CUSTOM_KINDS in allowed)


def resolve_kind(resource: str, *, allowed: Sequence[str] | None = None) -> meta.Kind:
    """The Kind named by `resource` (plural, singular, short or kind name; custom kinds are learnt from the
    server's ResourceDefinitions when the name is not known yet); a usage error otherwise."""
    kind = _known(resource)
    if kind is None:
        _discovered(resource)
        kind = _known(resource)
    if kind is None:
        known = ", ".join(p for p in allowed or sorted(k.plural for k in meta.registered()) if p != CUSTOM_KINDS)
        raise click.UsageError(f'the server doesn\'t have a resource type "{resource}" (known: {known})') from None
    if allowed is not None and not is_allowed(kind, allowed):
        raise click.UsageError(f"{kind.plural} are not supported here; use one of: {', '.join(allowed)}")
    return kind


def _known(resource: str) -> meta.Kind | None:
    """The kind this process knows by `resource`: a name of it, or `NAME.GROUP` as kubectl takes it
    (`backups.ops.example.com`, `backup.ops.example.com`), a custom kind's name qualified by its group."""
    try:
        return meta.kind_for(resource)
    except KeyError:
        pass
    name, dot, group = resource.partition(".")
    if not dot:
        return None
    try:
        kind = meta.kind_for(name)
    except KeyError:
        return None
    return kind if kind.group.lower() == group.lower() else None


def _discovered(resource: str) -> meta.Kind | None:
    """The custom kind named `resource` after asking the server for its definitions (None when it has none, or
    when there is no server to ask from here)."""
    ctx = click.get_current_context(silent=True)
    settings = ctx.find_object(Settings) if ctx is not None else None
    if settings is None:
        return None
    try:
        asyncio.get_running_loop()
        return None  # inside a command's event loop: the command discovers itself
    except RuntimeError:
        pass
    asyncio.run(_discover_or_unreachable(settings))
    try:
        return meta.kind_for(resource)
    except KeyError:
        return None


async def _discover_or_unreachable(settings: Settings) -> None:
    """`discover_kinds`, except that a server that cannot be reached is said so (a CommandError naming its
    address) rather than leaving the name unknown, which would read as "the server doesn't have" the kind."""
    try:
        async with settings.client() as client:
            await client.discover()
    except Unavailable as exc:
        raise as_command_error(exc) from None
    except CaravanseraiError:
        return


async def discover_kinds(settings: Settings) -> None:
    """Learn the server's custom kinds (see `Client.discover`); nothing when the server cannot tell (unreachable,
    or the caller may not read definitions): commands then report unknown kinds themselves."""
    try:
        async with settings.client() as client:
            await client.discover()
    except CaravanseraiError:
        return


def parse_target(
    resource: str, names: Sequence[str], *, allowed: Sequence[str] | None = None
) -> tuple[meta.Kind, list[str]]:
    """(kind, names) from `RESOURCE NAME…` or `RESOURCE/NAME …` arguments."""
    if "/" not in resource:
        extra = [n for n in names if "/" in n]
        if extra:
            raise click.UsageError(f"there is no need to give a resource type as a separate argument with {extra[0]}")
        return resolve_kind(resource, allowed=allowed), list(names)
    pairs = [_split_pair(item, allowed) for item in (resource, *names)]
    kinds = {kind.plural for kind, _ in pairs}
    if len(kinds) > 1:
        raise click.UsageError("all resource/name arguments must be of the same kind")
    return pairs[0][0], [name for _, name in pairs]


def split_target(item: str) -> tuple[meta.Kind, str]:
    """(kind, name) of one `KIND/NAME` argument such as `project/web`; a usage error otherwise."""
    return _split_pair(item, None)


def _split_pair(item: str, allowed: Sequence[str] | None) -> tuple[meta.Kind, str]:
    type_, sep, name = item.partition("/")
    if not sep or not type_ or not name:
        raise click.UsageError(f"arguments in resource/name form must all have a resource type: {item}")
    return resolve_kind(type_, allowed=allowed), name


async def get_object(resources: ResourceClient[Any], name: str) -> Any:
    """The object, or NotFound worded as kubectl does (`projects "web" not found`)."""
    try:
        return await resources.get(name)
    except NotFound:
        raise not_found(resources.resource, name) from None


async def modify(
    resources: ResourceClient[Any],
    name: str,
    mutate: Callable[[Any], bool | Awaitable[bool]],
) -> tuple[Any, bool]:
    """`caravanserai.client.apply.modify`, with NotFound worded as kubectl does."""
    try:
        return await client_apply.modify(resources, name, mutate)
    except NotFound:
        raise not_found(resources.resource, name) from None


__all__ = ["CONFLICT_RETRIES", "get_object", "modify", "parse_target", "resolve_kind", "split_target"]
