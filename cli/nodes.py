"""`caractrl cordon|uncordon|drain NODE`: take a node out of scheduling, and empty it.

* `cordon` sets `spec.unschedulable` (read, change, write with the version read; re-read on Conflict): the
  scheduler places nothing new there; what runs keeps running.
* `uncordon` clears it.
* `drain` cordons, then deletes every project bound to the node, after confirmation (`--yes` skips the
  prompt). The phase table has no way back from Running to Pending for a client, so a drained project is
  *deleted* (its containers are stopped by the agent), not moved: re-apply its manifest to run it elsewhere.
  `--force` removes the records at once; `--wait` waits until they are gone.
"""

from __future__ import annotations

import click

from caravanserai import meta
from caravanserai.client import nodeops
from caravanserai.client.nodeops import LEAVING
from caravanserai.durations import parse_duration
from caravanserai.errors import NotFound

from caravanserai.cli.common import complete_names, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.delete import DeleteOptions, Target, delete_targets
from caravanserai.cli.errors import PartialFailure, not_found


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
    command.fixed_resource = "nodes"  # type: ignore[attr-defined]
    return command


cordon = _cordon_command("cordon", True, "cordoned", "Mark NODE unschedulable: nothing new is placed on it.")
uncordon = _cordon_command("uncordon", False, "uncordoned", "Mark NODE schedulable again.")


async def _bound_projects(settings: Settings, node: str) -> list[str]:
    async with settings.client() as client:
        return await nodeops.drainable_projects(client, node)


async def _drain(settings: Settings, projects: list[str], opts: DeleteOptions) -> bool:
    kind = meta.KINDS["projects"]
    async with settings.client() as client:
        return await delete_targets(client, [Target(kind, name) for name in projects], opts)


@click.command("drain")
@click.argument("node", shell_complete=complete_names)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Remove the project records at once, skipping Terminating.")
@click.option("--wait/--no-wait", default=False, show_default=True, help="Wait until the projects are gone.")
@click.option("--timeout", default="60s", show_default=True, help="How long --wait waits (0: forever).")
@pass_settings
def drain(settings: Settings, node: str, yes: bool, force: bool, wait: bool, timeout: str) -> None:
    """Cordon NODE, then delete every project bound to it (they are not moved: re-apply them)."""
    try:
        opts = DeleteOptions(force=force, wait=wait, timeout=parse_duration(timeout), ignore_not_found=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timeout'") from None
    changed = run(set_unschedulable(settings, node, True))
    click.echo(f"node/{node} cordoned" if changed else f"node/{node} already cordoned")
    projects = run(_bound_projects(settings, node))
    if projects:
        listed = ", ".join(projects)
        question = f"Delete {len(projects)} project(s) on node/{node} ({listed})?"
        if not yes and not click.confirm(question, err=True):
            click.echo(f"node/{node} stays cordoned; undo with: caractrl uncordon {node}", err=True)
            raise PartialFailure()
        if run(_drain(settings, projects, opts)):
            raise PartialFailure()
    click.echo(f"node/{node} drained")


# a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
drain.fixed_resource = "nodes"  # type: ignore[attr-defined]

__all__ = ["LEAVING", "cordon", "drain", "set_unschedulable", "uncordon"]
