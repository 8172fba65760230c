"""Namespaces in caractrl, kubectl's way: `-n/--namespace NS` and `-A/--all-namespaces`, before or after the command.

    caractrl -n team-a get projects          # the same as `caractrl get projects -n team-a`
    caractrl get projects -A                 # every namespace, with a NAMESPACE column first
    caractrl config set-context --current --namespace=team-a   # the default namespace of later commands

The options are the root command's (`caractrl.py`), parsed wherever they were typed (`cli/scope.py`). This module
holds the commands about namespaces: `config set-context` (the default namespace) and `create namespace`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from ruamel.yaml import YAML

from caravanserai import meta, v1
from caravanserai.cli.common import pass_settings, run
from caravanserai.cli.config import ConfigError, Settings, default_config_path
from caravanserai.cli.printers import resource_name
from caravanserai.text.selectors import validate_dns_label


def set_config_namespace(path: Path | None, namespace: str) -> Path:
    """Write `namespace: NS` into the config file (`path`, else the default one), keeping its other keys and
    comments; create the file when it does not exist. Returns the path written."""
    target = path if path is not None else default_config_path()
    yaml = YAML(typ="rt")
    data: Any = yaml.load(target.read_text(encoding="utf-8")) if target.exists() else None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {target}: expected a mapping of settings")
    data["namespace"] = namespace
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        yaml.dump(data, out)
    return target


@click.group("config")
def config() -> None:
    """Change caractrl's config file (`--config`, $CARA_CONFIG or the default one)."""


@config.command("set-context")
@click.option("--current", is_flag=True, help="Change the current context (caractrl has one: the config file).")
@pass_settings
def set_context(settings: Settings, current: bool) -> None:
    """Set the default namespace: `caractrl config set-context --current --namespace=team-a` (`--namespace` is
    caractrl's own option, given here as kubectl users type it)."""
    if not settings.namespace:
        raise click.UsageError("set-context needs --namespace=NS (the only setting a context has)")
    path = set_config_namespace(settings.config_path, settings.namespace)
    click.echo(f'Context modified: namespace "{settings.namespace}" ({path}).')


@click.group("create")
def create() -> None:
    """Create an object from the command line (namespaces; other kinds: `apply -f`)."""


@create.command("namespace")
@click.argument("name")
@click.option("--dry-run", is_flag=True, help="Show what would be created without creating it.")
@pass_settings
def create_namespace(settings: Settings, name: str, dry_run: bool) -> None:
    """Create the namespace NAME (kubectl's `create namespace`; alias `ns`)."""
    problem = validate_dns_label(name)
    if problem:
        raise click.BadParameter(f"{name!r}: {problem}", param_hint="NAME")
    run(_create_namespace(settings, name, dry_run=dry_run))


create.add_command(create_namespace, "ns")


async def _create_namespace(settings: Settings, name: str, *, dry_run: bool) -> None:
    namespace = meta.with_type_meta(v1.Namespace())
    namespace.metadata.name = name
    if not dry_run:
        async with settings.client() as client:
            namespace = await client.namespaces.create(namespace)
    click.echo(f"{resource_name(namespace)} created{' (dry run)' if dry_run else ''}")


__all__ = ["config", "create", "set_config_namespace"]
