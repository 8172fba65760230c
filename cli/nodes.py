"""`caractrl cordon|uncordon|drain NODE`: take a node out of scheduling, and empty it.

* `cordon` sets `spec.unschedulable` (read, change, write with the version read; re-read on Conflict): the
  scheduler places nothing new there; what runs keeps running.
* `uncordon` clears it.
* `drain` cordons, then moves every Scheduled or Running project bound to the node (`lifecycle.move`, reason
  NodeDrained): a project without backed-up volumes returns to Pending and the scheduler places it elsewhere,
  while the node's agent keeps the old containers running until the project runs on its new node or `--timeout`
  (default 5m) passes; a project with backed-up volumes stays bound until its node has stopped it and taken a
  final backup (at most `--timeout`), then moves with those snapshots. It waits (unless `--no-wait`, at most
  `--timeout`) until each moved project is Running (or Succeeded) on another node: a project that goes Failed is
  reported by name with its message, and so is one not there in time; either way drain exits 1. Replicas of a
  ProjectSet with a disruption budget move one budget at a time (`client.budgets`): one whose move would leave
  its set below the budget waits until the replicas moved before it are available elsewhere; one still held
  after `--timeout` is reported and not moved (exit 1).
* A project with a Persistent volume without a backup would leave that data behind: drain refuses, before
  writing anything (not even the cordon), naming every such project and volume in one line, unless `--force`
  (then it moves them and says that the data stays behind).
* `drain --delete` deletes the projects instead, after confirmation (`--yes` skips the prompt); `--force`
  removes the records at once; `--wait` waits until they are gone.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from caravanserai import meta, v1
from caravanserai.cli.common import complete_names, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.delete import DeleteOptions, Target, delete_targets
from caravanserai.cli.errors import PartialFailure, not_found
from caravanserai.cli.moves import PLACED, moving_line, refuse_unprotected, wait_moved
from caravanserai.client import nodeops
from caravanserai.client.budgets import BudgetedMoves, move_within_budgets
from caravanserai.client.nodeops import LEAVING
from caravanserai.clock import SystemClock
from caravanserai.errors import NotFound
from caravanserai.project.lifecycle import DEFAULT_HANDOFF
from caravanserai.text.durations import format_duration, parse_duration


async def set_unschedulable(settings: Settings, node: str, value: bool) -> bool:
    """Set spec.unschedulable of `node`; returns whether it changed."""
    async with settings.client() as client:
        try:
            return await nodeops.set_unschedulable(client, node, value)
        except NotFound:
            raise not_found("nodes", node) from None


def _cordon_command(name: str, value: bool, done: str, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @click.argument("node", shell_complete=complete_names)
    @pass_settings
    def command(settings: Settings, node: str) -> None:
        changed = run(set_unschedulable(settings, node, value))
        click.echo(f"node/{node} {done}" if changed else f"node/{node} already {done}")

    # a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
    command.fixed_resource = "nodes"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute
    return command


cordon = _cordon_command("cordon", True, "cordoned", "Mark NODE unschedulable: nothing new is placed on it.")
uncordon = _cordon_command("uncordon", False, "uncordoned", "Mark NODE schedulable again.")


async def _bound_projects(settings: Settings, node: str) -> list[str]:
    async with settings.client() as client:
        return await nodeops.drainable_projects(client, node)


async def _delete(settings: Settings, projects: list[str], opts: DeleteOptions) -> bool:
    kind = meta.KINDS["projects"]
    async with settings.client() as client:
        return await delete_targets(client, [Target(kind, name) for name in projects], opts)


async def _movable(settings: Settings, node: str) -> list[v1.Project]:
    """The projects a drain of `node` moves (Scheduled or Running there, not being deleted), by key."""
    async with settings.client() as client:
        bound = list(await client.projects.list(field_selector=f"status.nodeRef={node}"))
    keys = nodeops.movable_projects(bound, node)
    return sorted((p for p in bound if meta.key_of(p) in keys), key=meta.key_of)


async def _move(settings: Settings, node: str, projects: Sequence[v1.Project], timeout: float) -> BudgetedMoves:
    """Move `projects` off `node` with a hand-off of `timeout`, the replicas of a ProjectSet one disruption budget
    at a time (`client.budgets`): what was moved and what its budget kept."""
    async with settings.client() as client:
        return await move_within_budgets(
            client,
            node,
            projects,
            clock=SystemClock(),
            handoff=timeout,
            timeout=timeout,
            moved=lambda project: click.echo(moving_line(project, node)),
            waiting=lambda reason: click.echo(f"waiting for a disruption budget: {reason}"),
        )


@click.command("drain")
@click.argument("node", shell_complete=complete_names)
@click.option("--delete", "delete_", is_flag=True, help="Delete the projects instead of moving them (asks first).")
@click.option("-y", "--yes", is_flag=True, help="With --delete: do not ask for confirmation.")
@click.option(
    "--force",
    is_flag=True,
    help="Move projects whose Persistent volumes have no backup (their data stays behind on the node); with "
    "--delete: remove the records at once, skipping Terminating.",
)
@click.option(
    "--wait/--no-wait",
    default=None,
    help="Wait until the projects are Running (or Succeeded) elsewhere; one that goes Failed, or is not there "
    "within --timeout, is reported by name and drain exits 1 (with --delete: until they are gone). Default: wait "
    "when moving.",
)
@click.option(
    "--timeout",
    default=format_duration(DEFAULT_HANDOFF),
    show_default=True,
    help="How long the old containers keep running while a moved project starts elsewhere (with backed-up "
    "volumes: how long its node may take for the final backup), and how long --wait waits.",
)
@pass_settings
def drain(
    settings: Settings, node: str, delete_: bool, yes: bool, force: bool, wait: bool | None, timeout: str
) -> None:
    """Cordon NODE and move its projects to other nodes (reason NodeDrained).

    Replicas of a ProjectSet with a disruption budget move one budget at a time: the next waits until the moved
    ones are available again elsewhere (at most --timeout; those still held are reported and drain exits 1).

    The old containers keep running until a project runs on its new node, or until --timeout passes. A project
    with backed-up volumes is stopped and backed up one last time first, and its new node restores exactly that
    backup. A project with a Persistent volume without backup is refused (nothing is written) unless --force:
    its data would stay behind. With --delete, the projects are deleted instead (asks first).
    """
    try:
        seconds = parse_duration(timeout)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timeout'") from None
    if not delete_:
        refuse_unprotected(run(_movable(settings, node)), node, force=force)
    changed = run(set_unschedulable(settings, node, True))
    click.echo(f"node/{node} cordoned" if changed else f"node/{node} already cordoned")
    if delete_:
        _drain_by_deleting(
            settings, node, yes, DeleteOptions(force=force, wait=bool(wait), timeout=seconds, ignore_not_found=True)
        )
    else:
        projects = run(_movable(settings, node))  # again: one may have been bound before the cordon took effect
        refuse_unprotected(projects, node, force=force)
        moves = run(_move(settings, node, projects, seconds))
        for key, reason in sorted(moves.refused.items()):
            click.echo(f"error: project/{meta.shown(key)} not moved within --timeout: {reason}", err=True)
        moved = moves.moved
        waited = run(wait_moved(settings, moved, node, seconds)) if moved and wait is not False else None
        if (waited is not None and waited.report(timeout)) or moves.refused:
            raise PartialFailure()
    click.echo(f"node/{node} drained")


def _drain_by_deleting(settings: Settings, node: str, yes: bool, opts: DeleteOptions) -> None:
    projects = run(_bound_projects(settings, node))
    if not projects:
        return
    listed = ", ".join(projects)
    question = f"Delete {len(projects)} project(s) on node/{node} ({listed})?"
    if not yes and not click.confirm(question, err=True):
        click.echo(f"node/{node} stays cordoned; undo with: caractrl uncordon {node}", err=True)
        raise PartialFailure()
    if run(_delete(settings, projects, opts)):
        raise PartialFailure()


# a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
drain.fixed_resource = "nodes"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute

__all__ = ["LEAVING", "PLACED", "cordon", "drain", "set_unschedulable", "uncordon"]
