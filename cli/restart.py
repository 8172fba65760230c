"""`caractrl restart project NAME [SERVICE...]`: recreate services without editing the manifest.

Like `kubectl rollout restart`, the restart is a spec change: `spec.services[].restartedAt` of the named services
(every service when none is named) is set to now. The generation moves on, the agent sees a new spec hash for
exactly those services and recreates their containers; a Failed or Succeeded project returns to Pending and is
placed again. A later `caractrl apply` of the unchanged manifest keeps the stamp (it is not in the manifest).
"""

from __future__ import annotations

import click

from caravanserai.cli.common import complete_names, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import not_found
from caravanserai.client import nodeops
from caravanserai.clock import SystemClock
from caravanserai.errors import NotFound

RESTARTABLE = ("project", "projects", "p")


async def _restart(settings: Settings, name: str, services: tuple[str, ...]) -> int:
    async with settings.client() as client:
        try:
            project = await nodeops.restart_services(client, name, services, now=SystemClock().now())
        except NotFound:
            raise not_found("projects", name) from None
    return int(project.metadata.generation)


@click.command("restart")
@click.argument("kind", type=click.Choice(RESTARTABLE, case_sensitive=False), metavar="project")
@click.argument("name", shell_complete=complete_names)
@click.argument("services", nargs=-1)
@pass_settings
def restart(settings: Settings, kind: str, name: str, services: tuple[str, ...]) -> None:
    """Recreate the containers of project NAME: all services, or only the SERVICEs named.

    Works on Running, Failed and Succeeded projects (the last two return to Pending and are placed again).
    """
    generation = run(_restart(settings, name, services))
    which = ", ".join(services) if services else "all services"
    click.echo(f"project/{name} restarted ({which}; generation {generation})")


# a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
restart.fixed_resource = "projects"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute

__all__ = ["restart"]
