"""`caractrl version` and `--version`: the installed distribution's version (importlib.metadata)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

import click


def installed_version() -> str:
    """The version of the installed `caravanserai` distribution ("unknown" when run from a bare checkout)."""
    try:
        return _distribution_version("caravanserai")
    except PackageNotFoundError:
        return "unknown"


VERSION = installed_version()


@click.command("version")
def version() -> None:
    """Print the client version."""
    click.echo(f"caractrl {VERSION}")


__all__ = ["VERSION", "installed_version", "version"]
