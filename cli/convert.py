"""`caractrl convert compose.yaml`: the Project manifest equivalent to a Compose file, printed (nothing is sent).

    caractrl convert compose.yaml > project.yaml      # YAML (default); -o json for JSON
    caractrl convert .                                # a folder: its compose.yaml, compose.yml, docker-compose.y(a)ml

Each key without an equivalent is one `warning:` line on stderr; a file that cannot be converted is one `error:`
line naming the key (exit 1). The conversion is `caravanserai.compose` (see docs/coming-from-compose.md).
"""

from __future__ import annotations

import os

import click

from caravanserai.cli.common import output_option, pass_settings
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError, one_line
from caravanserai.cli.printers import render_objects
from caravanserai.compose import ComposeError, convert_file


@click.command("convert")
@click.argument("path", metavar="FILE|DIR")
@click.option("--name", default="", help="Project name (default: the file's name:, else its folder's name).")
@output_option(("yaml", "json"))
@pass_settings
def convert(settings: Settings, path: str, name: str, output: str | None) -> None:
    """Print the Project manifest equivalent to a Compose file (or a folder holding compose.yaml), with a warning
    line on stderr for each Compose key that has no equivalent.

    Variables (${VAR}, ${VAR:-default}, ...) are substituted from the environment, then from the .env file beside
    the Compose file, as Compose does. Apply the result with `caractrl apply -f`, or apply the Compose file
    directly: `caractrl apply -f compose.yaml`.
    """
    fmt = settings.output_format(output, default="yaml").lower()
    fmt = fmt if fmt in ("yaml", "json") else "yaml"
    try:
        conversion = convert_file(path, name=name, environ=dict(os.environ))
    except ComposeError as exc:
        raise CommandError(one_line(f"error: {exc}")) from None
    for note in conversion.notes:
        click.echo(str(note), err=True)
    click.echo(render_objects([conversion.project], fmt, single=True), nl=False)


__all__ = ["convert"]
