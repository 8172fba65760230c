"""`caractrl restart [project] NAME [SERVICE...]`: recreate services without editing the manifest, or, with
`--move`, move the project off its node.

Like `kubectl rollout restart`, the restart is a spec change: `spec.services[].restartedAt` of the named services
(every service when none is named) is set to now. The generation moves on, the agent sees a new spec hash for
exactly those services and recreates their containers; a Failed or Succeeded project returns to Pending and is
placed again. A later `caractrl apply` of the unchanged manifest keeps the stamp (it is not in the manifest).

`restart NAME --move` moves a Scheduled or Running project off its node as a drain would, for this one project
(`lifecycle.move`, reason Restarted): without backed-up volumes it returns to Pending at once while its old
containers keep running until it runs elsewhere or `--timeout` passes; with backed-up volumes its node stops it,
takes a final backup and hands the snapshots over (at most `--timeout`), and the next node restores exactly
those. A Persistent volume without a backup is refused (nothing written) unless `--force`: its data stays behind.
The word `project` before NAME is optional (`restart project web`, `restart project/web`, `restart web`).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from caravanserai import v1
from caravanserai.cli.common import complete_names, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError, PartialFailure, not_found
from caravanserai.cli.moves import moving_line, refuse_unprotected, wait_moved
from caravanserai.cli.resources import get_object
from caravanserai.client import nodeops
from caravanserai.clock import SystemClock
from caravanserai.errors import NotFound
from caravanserai.project import lifecycle
from caravanserai.text.durations import format_duration, parse_duration

RESTARTABLE = ("project", "projects", "p")


def parse_arguments(args: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """(project name, services) from `[project] NAME [SERVICE...]` or `project/NAME [SERVICE...]`; a usage error
    when no name is given or another kind is named."""
    first, *rest = args
    kind, slash, name = first.partition("/")
    if slash:
        if kind.lower() not in RESTARTABLE or not name:
            raise click.UsageError(f"only projects can be restarted, not {first}")
        return name, tuple(rest)
    if first.lower() in RESTARTABLE:
        if not rest:
            raise click.UsageError("missing the project NAME")
        return rest[0], tuple(rest[1:])
    return first, tuple(rest)


async def _restart(settings: Settings, name: str, services: tuple[str, ...]) -> int:
    async with settings.client() as client:
        try:
            project = await nodeops.restart_services(client, name, services, now=SystemClock().now())
        except NotFound:
            raise not_found("projects", name) from None
    return int(project.metadata.generation)


def not_movable(project: v1.Project) -> str | None:
    """Why `project` cannot be moved off its node (None when it can: Scheduled or Running, not being deleted)."""
    name, phase = project.metadata.name, project.status.phase or v1.PENDING
    if project.metadata.HasField("deletion_timestamp"):
        return f"project/{name} is being deleted; it is not moved"
    if phase not in (v1.SCHEDULED, v1.RUNNING) or not project.status.node_ref:
        return f"project/{name} is {phase}: only a Scheduled or Running project can be moved off its node"
    return None


async def _move(settings: Settings, name: str, timeout: float, force: bool) -> tuple[v1.Project, str]:
    """Move project `name` off its node (reason Restarted); the project as read and the node it leaves."""
    async with settings.client() as client:
        project = await get_object(client.projects, name)
        why = not_movable(project)
        if why is not None:
            raise CommandError(f"error: {why}")
        node = project.status.node_ref
        refuse_unprotected([project], node, force=force, action="move")
        now = SystemClock().now()
        message = f"Restarted with --move; leaving node {node}"
        moving = await nodeops.move_project(
            client, name, node, now=now, handoff_until=now + timeout, reason=lifecycle.REASON_RESTARTED, message=message
        )
    if not moving:
        raise CommandError(f"error: project/{name} changed meanwhile (no longer on node/{node}); nothing was moved")
    return project, node


def _run_move(settings: Settings, name: str, timeout: str, wait: bool, force: bool) -> None:
    try:
        seconds = parse_duration(timeout)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timeout'") from None
    project, node = run(_move(settings, name, seconds, force))
    click.echo(moving_line(project, node))
    if wait and run(wait_moved(settings, [name], node, seconds)).report(timeout):
        raise PartialFailure()


@click.command("restart")
@click.argument("args", nargs=-1, required=True, metavar="[project] NAME [SERVICE]...", shell_complete=complete_names)
@click.option("--move", is_flag=True, help="Move the project off its node instead (as a drain would, for one project).")
@click.option(
    "--timeout",
    default=None,
    help="With --move: how long the old containers keep running while it starts elsewhere (with backed-up "
    f"volumes: how long its node may take for the final backup), and how long --wait waits "
    f"[default: {format_duration(lifecycle.DEFAULT_HANDOFF)}].",
)
@click.option("--wait", is_flag=True, help="With --move: wait until the project runs on another node.")
@click.option("--force", is_flag=True, help="With --move: move it even though a Persistent volume has no backup.")
@pass_settings
def restart(
    settings: Settings, args: tuple[str, ...], move: bool, timeout: str | None, wait: bool, force: bool
) -> None:
    """Recreate the containers of project NAME: all services, or only the SERVICEs named; with --move, move it
    off its node.

    Works on Running, Failed and Succeeded projects (the last two return to Pending and are placed again). With
    --move (Scheduled and Running projects), backed-up volumes get a final backup first and the next node restores
    exactly that; a Persistent volume without a backup is refused unless --force (its data stays behind).
    """
    name, services = parse_arguments(args)
    if move:
        if services:
            raise click.UsageError("--move moves the whole project; it takes no SERVICE")
        _run_move(settings, name, timeout or format_duration(lifecycle.DEFAULT_HANDOFF), wait, force)
        return
    if wait or force or timeout is not None:
        raise click.UsageError("--wait, --force and --timeout go with --move")
    generation = run(_restart(settings, name, services))
    which = ", ".join(services) if services else "all services"
    click.echo(f"project/{name} restarted ({which}; generation {generation})")


# a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
restart.fixed_resource = "projects"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute

__all__ = ["RESTARTABLE", "not_movable", "parse_arguments", "restart"]
