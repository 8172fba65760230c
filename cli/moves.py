"""What `caractrl drain` and `caractrl restart --move` share: the guard against leaving volume data behind, the
line that reports each move, and waiting until moved projects run elsewhere.

Guarantees:

* `refuse_unprotected` raises before anything is written when a project to move has a Persistent volume without a
  backup (its data would stay on the node), naming every such project and volume in one line, unless forced.
* `moving_line` says what a move does to the data: `project/db moving off node/n1 (final backup of data first)`
  for backed-up volumes (the project stays bound until its node hands the snapshots over), `…; volume data stays
  behind on n1 (files)` for forced moves of unprotected ones.
* `wait_moved` polls until each project runs (or finished) on another node, or is gone, or the timeout passes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import click

from caravanserai import v1
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.client import nodeops
from caravanserai.clock import SystemClock
from caravanserai.errors import NotFound
from caravanserai.project import backups

PLACED = (v1.SCHEDULED, v1.RUNNING, v1.SUCCEEDED, v1.FAILED)
"""A moved project has arrived once it is in one of these phases on another node."""
POLL_INTERVAL = 0.5
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


async def wait_moved(settings: Settings, names: Sequence[str], node: str, timeout: float) -> list[str]:
    """Wait until every project in `names` runs (or finished) on another node, printing each; the names still not
    there after `timeout`."""
    clock = SystemClock()
    deadline = clock.monotonic() + timeout
    waiting = list(names)
    async with settings.client() as client:
        while waiting:
            for name in list(waiting):
                try:
                    project = await client.projects.get(name)
                except NotFound:
                    waiting.remove(name)
                    continue
                status = project.status
                if status.node_ref and status.node_ref != node and status.phase in PLACED:
                    click.echo(f"project/{name} {status.phase.lower()} on node/{status.node_ref}")
                    waiting.remove(name)
            if not waiting or clock.monotonic() >= deadline:
                break
            await asyncio.sleep(POLL_INTERVAL)
    return waiting


__all__ = ["FORCE_HINT", "PLACED", "POLL_INTERVAL", "moving_line", "refuse_unprotected", "wait_moved"]
