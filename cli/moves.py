"""What `caractrl drain` and `caractrl restart --move` share: the guard against leaving volume data behind, the
line that reports each move, and waiting until moved projects run elsewhere.

Guarantees:

* `refuse_unprotected` raises before anything is written when a project to move has a Persistent volume without a
  backup (its data would stay on the node), naming every such project and volume in one line, unless forced.
* `moving_line` says what a move does to the data: `project/db moving off node/n1 (final backup of data first)`
  for backed-up volumes (the project stays bound until its node hands the snapshots over), `…; volume data stays
  behind on n1 (files)` for forced moves of unprotected ones.
* `wait_moved` polls until each project runs (or succeeded) on another node, or is gone, or the timeout passes;
  a Scheduled project has not arrived yet (its containers may still fail to start). A project that goes Failed is
  reported by name with its phase message, one that is still on its way at the timeout with where it is
  (`MoveWait.report`), and the command then exits 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import click

from caravanserai import meta, v1
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.client import nodeops
from caravanserai.clock import SystemClock, seconds
from caravanserai.errors import NotFound
from caravanserai.project import backups

PLACED = (v1.SCHEDULED, v1.RUNNING, v1.SUCCEEDED, v1.FAILED)
"""The phases of a project bound to a node (what a drain leaves alone when it is not Scheduled or Running)."""
ARRIVED = (v1.RUNNING, v1.SUCCEEDED)
"""A moved project has arrived once it is in one of these phases on another node."""
POLL_INTERVAL = 0.5
REBIND_MARGIN = 30.0
FORCE_HINT = "use --force to move them anyway (their data stays behind)"


def refuse_unprotected(projects: Sequence[v1.Project], node: str, *, force: bool, action: str = "drain") -> None:
    """CommandError (nothing written) when a project in `projects` has Persistent volumes without a backup, unless
    `force`. `action` is the verb of the message (`drain node/n1`, `move project/web`)."""
    unprotected = nodeops.unprotected_volumes(projects)
    if not unprotected or force:
        return
    if action == "drain":
        raise CommandError(f"error: {nodeops.drain_refusal(node, unprotected, FORCE_HINT)}")
    raise CommandError(
        f"error: cannot move {nodeops.left_behind(unprotected)} off node/{node}: its Persistent volume data would "
        f"stay behind (no backup configured); use --force to move it anyway"
    )


def moving_line(project: v1.Project, node: str) -> str:
    """The line reporting that `project` is moving off `node`, saying what happens to its volume data."""
    line = f"project/{project.metadata.name} moving off node/{node}"
    saved = [volume.name for volume in backups.backed_up(project.spec)]
    if saved:
        line += f" (final backup of {', '.join(saved)} first)"
    stays = backups.unprotected(project.spec)
    if stays:
        line += f"; volume data stays behind on {node} ({', '.join(stays)}: no backup)"
    return line


@dataclass(frozen=True)
class MoveWait:
    """How the moved projects ended up: `failed` (name → the Failed phase's message), `late` (name → where it was
    when the wait gave up, e.g. `Scheduled on node/n2`)."""

    failed: dict[str, str] = field(default_factory=dict)
    late: dict[str, str] = field(default_factory=dict)

    def report(self, timeout: str) -> bool:
        """Print one error line per failed project and one for the late ones (stderr); whether any was."""
        for name, message in sorted(self.failed.items()):
            click.echo(f"error: project/{name} failed: {message}", err=True)
        if self.late:
            where = ", ".join(f"{name} ({state})" for name, state in sorted(self.late.items()))
            click.echo(f"error: not running elsewhere after {timeout}: {where}", err=True)
        return bool(self.failed or self.late)


def _phase_message(project: v1.Project) -> str:
    condition = meta.get_condition(project.status.conditions, v1.CONDITION_PHASE)
    if condition is None:
        return "(no message)"
    return f"{condition.reason}: {condition.message}" if condition.message else condition.reason


def _where(project: v1.Project) -> str:
    status = project.status
    place = f"{status.phase} on node/{status.node_ref}" if status.node_ref else status.phase or "Pending"
    if status.HasField("move"):
        place += ", final backup not taken yet"
    return place


def _rebound_since(project: v1.Project, since: float) -> bool:
    """Whether `project` was bound again after `since` (its Scheduled condition turned True then): a move may end
    on the node it left when no other node fits (`restart --move`; a drained node is cordoned)."""
    scheduled = meta.get_condition(project.status.conditions, v1.CONDITION_SCHEDULED)
    return scheduled is not None and scheduled.status == v1.TRUE and seconds(scheduled.last_transition_time) >= since


def _arrived(project: v1.Project, node: str, since: float) -> str | None:
    """The line to print when `project` (moved off `node` at `since`) has arrived for good, or None while it is on
    its way."""
    status, name = project.status, project.metadata.name
    elsewhere = status.node_ref != node or _rebound_since(project, since)
    if status.phase in ARRIVED and status.node_ref and elsewhere and not status.HasField("move"):
        return f"project/{name} {status.phase.lower()} on node/{status.node_ref}"
    if status.phase in (v1.TERMINATING, v1.TERMINATED):
        return f"project/{name} is being deleted"
    return None


async def wait_moved(settings: Settings, names: Sequence[str], node: str, timeout: float) -> MoveWait:
    """Wait until every project in `names` runs (or succeeded) on another node, printing each, or went Failed
    (anywhere: on its new node, or while its old node took the final backups), or is gone; at most `timeout`
    seconds. A project with backed-up volumes is first still bound to `node` with `status.move`, then Pending,
    then bound elsewhere: only Running or Succeeded on another node ends its wait."""
    clock = SystemClock()
    # A move sets Scheduled=False in the same write (or keeps the project bound with `status.move`), so a Scheduled
    # condition turned True shortly before the wait began is a new binding too; the margin covers a bind that beat
    # this read and clocks that differ a little.
    deadline, since = clock.monotonic() + timeout, clock.now() - REBIND_MARGIN
    waiting = {name: "Pending" for name in names}
    outcome = MoveWait()
    async with settings.client() as client:
        while waiting:
            for name in list(waiting):
                try:
                    project = await client.projects.get(name)
                except NotFound:
                    click.echo(f"project/{meta.shown(name)} deleted")
                    del waiting[name]
                    continue
                line = _arrived(project, node, since)
                if line is not None:
                    click.echo(line)
                    del waiting[name]
                elif project.status.phase == v1.FAILED:
                    where = f" on node/{project.status.node_ref}" if project.status.node_ref else ""
                    outcome.failed[meta.shown(name)] = f"Failed{where}: {_phase_message(project)}"
                    del waiting[name]
                else:
                    waiting[name] = _where(project)
            if not waiting or clock.monotonic() >= deadline:
                break
            await asyncio.sleep(POLL_INTERVAL)
    outcome.late.update({meta.shown(key): where for key, where in waiting.items()})
    return outcome


__all__ = [
    "ARRIVED",
    "FORCE_HINT",
    "MoveWait",
    "PLACED",
    "POLL_INTERVAL",
    "moving_line",
    "refuse_unprotected",
    "wait_moved",
]
