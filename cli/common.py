"""Pieces every caractrl command uses: running an async body, the `-o` option, shell completion of arguments.

Click calls command functions synchronously and would silently drop a coroutine, so each command body is an
`async def` run with `run(...)` (one event loop per invocation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem

from caravanserai import meta
from caravanserai.cli import jsonpath
from caravanserai.cli.config import OUTPUT_FORMATS, Settings
from caravanserai.cli.printers import JSONPATH
from caravanserai.cli.scope import scoped

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
# How long shell completion may wait for the server before offering nothing.
COMPLETION_TIMEOUT = 2.0

pass_settings = click.make_pass_decorator(Settings, ensure=True)


def run(body: Coroutine[Any, Any, T]) -> T:
    """Run a command's async body to completion in a fresh event loop."""
    return asyncio.run(body)


class OutputFormat(click.Choice[str]):
    """One of the formats (any case, given back in lowercase), or `jsonpath=TEMPLATE` (kept as typed) when allowed;
    a template that does not parse is refused here, naming the part at fault."""

    def __init__(self, formats: Sequence[str], *, jsonpath: bool) -> None:
        super().__init__(list(formats), case_sensitive=False)
        self.jsonpath = jsonpath

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if self.jsonpath and text.startswith(JSONPATH):
            try:
                jsonpath.render(text.removeprefix(JSONPATH), {})
            except jsonpath.JsonPathError as exc:
                self.fail(f"bad jsonpath template: {exc}", param, ctx)
            return text
        return str(super().convert(value, param, ctx)).lower()


def output_option(formats: Sequence[str] = OUTPUT_FORMATS, *, with_jsonpath: bool = False) -> Callable[[F], F]:
    """`-o/--output`, accepted after the subcommand too (it wins over the one given before the subcommand);
    `with_jsonpath`: `-o jsonpath=TEMPLATE` too (kubectl's templates, `caravanserai.cli.jsonpath`)."""
    shown = [*formats, "jsonpath=TEMPLATE"] if with_jsonpath else formats
    return click.option(
        "-o",
        "--output",
        type=OutputFormat(formats, jsonpath=with_jsonpath),
        default=None,
        help=f"Output format: {'|'.join(shown)}.",
    )


# ---- shell completion -----------------------------------------------------------------------------------------


def complete_resource(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Resource type names (plural and singular) for the RESOURCE argument."""
    allowed = getattr(ctx.command, "allowed_resources", None) or sorted(meta.KINDS)
    words = sorted({w for k in allowed for w in (k, meta.KINDS[k].kind.lower())})
    return [CompletionItem(w) for w in words if w.startswith(incomplete)]


def complete_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Names of existing objects of the kind given before (asks the server; nothing when it does not answer)."""
    resource = ctx.params.get("resource") or getattr(ctx.command, "fixed_resource", None)
    settings = ctx.find_object(Settings) or settings_from_params(ctx.find_root().params)
    if not resource:
        return []
    try:
        plural = meta.kind_for(str(resource).partition("/")[0]).plural
        names = run(_names(settings, plural))
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def settings_from_params(params: dict[str, Any]) -> Settings:
    """Settings from the root command's parsed options (shell completion parses them but runs no callback)."""
    return Settings(
        server=params.get("server"),
        token=params.get("token"),
        config_path=params.get("config_path"),
        tls_ca=params.get("tls_ca"),
        tls_cert=params.get("tls_cert"),
        tls_key=params.get("tls_key"),
        namespace=params.get("namespace"),
    )


async def _names(settings: Settings, plural: str) -> list[str]:
    async with settings.client() as client:
        page = await asyncio.wait_for(scoped(client, plural).list(), COMPLETION_TIMEOUT)
        return sorted(o.metadata.name for o in page.items)


__all__ = [
    "COMPLETION_TIMEOUT",
    "complete_names",
    "complete_resource",
    "output_option",
    "pass_settings",
    "run",
    "settings_from_params",
]
