"""`caractrl backup PROJECT` and `caractrl restore PROJECT --volume V --snapshot ID`: ask the project's node for a
backup now, or for a restore of one snapshot, and optionally wait until it has handled the request.

    $ caractrl backup wiki --wait
    project/wiki backup requested (data)
    data: snapshot 4f1c2a9b (1.2MiB added, 3.2s)
    $ caractrl restore wiki --volume data --snapshot 4f1c2a9b --wait
    project/wiki restore of volume data from snapshot 4f1c2a9b requested
    data: restored snapshot 4f1c2a9b taken 2m ago on node-a

Guarantees:

* One write each, through the read-modify-write helper (`caravanserai.client.volumeops`); a volume without backup,
  an unknown volume and an unknown or ambiguous snapshot id are one-line errors naming it, and nothing is written.
* `--wait` watches the project (resuming after apiserver restarts) until every stamped volume's
  `backupRequestHandled` / `restoreRequestHandled` reaches the stamp, printing each volume's snapshot as it
  arrives or its error on stderr (exit 1); after `--timeout` it names the volumes still waiting (exit 1).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing, suppress

import click

from caravanserai import v1
from caravanserai.cli.common import complete_names, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError, PartialFailure, not_found
from caravanserai.cli.scope import scoped
from caravanserai.cli.watching import Selection, SelectionWatch
from caravanserai.client import Client, volumeops
from caravanserai.client.volumeops import Outcome
from caravanserai.client.volumestatus import short_id, size_text, took_text
from caravanserai.clock import SystemClock, run_within, seconds, timestamp
from caravanserai.errors import NotFound
from caravanserai.text.durations import format_duration, parse_duration

DEFAULT_TIMEOUT = "5m"
Reader = Callable[[v1.Project, str], Outcome | None]


def snapshot_line(outcome: Outcome, now: float, *, restored: bool = False) -> str:
    """`data: snapshot 4f1c2a9b (1.2MiB added, 3.2s)`, or for a restore `data: restored snapshot 4f1c2a9b taken
    2m ago on node-a`."""
    record = outcome.snapshot if outcome.snapshot is not None else v1.SnapshotRecord()
    if restored:
        taken = format_duration(now - seconds(record.time)) if record.HasField("time") else "?"
        return f"{outcome.volume}: restored snapshot {short_id(record.id)} taken {taken} ago on {record.node or '?'}"
    added = size_text(record.bytes_added)
    return f"{outcome.volume}: snapshot {short_id(record.id)} ({added} added, {took_text(record.duration_seconds)})"


def _parse_timeout(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timeout'") from None


async def _watch(client: Client, name: str, done: Callable[[v1.Project], bool]) -> None:
    """Return once `done(project)` holds, watching the project; NotFound when it is (or becomes) absent."""
    async with SelectionWatch(scoped(client, "projects"), Selection(field_selector=f"metadata.name={name}")) as watcher:
        items = await watcher.list_current()
        if not items:
            raise not_found("projects", name)
        if done(items[0]):
            return
        async with aclosing(watcher.events()) as events:
            async for event in events:
                if event.type == v1.DELETED:
                    raise not_found("projects", name)
                if done(event.object):
                    return


async def wait_outcomes(
    client: Client, name: str, volumes: list[str], read: Reader, *, timeout: float, show: Callable[[Outcome], None]
) -> list[str]:
    """Watch project `name` until `read` gives an outcome for each of `volumes` (each shown once, as it comes);
    the volumes still without one after `timeout` seconds (0: wait for ever)."""
    waiting = list(volumes)

    def done(project: v1.Project) -> bool:
        for volume in list(waiting):
            outcome = read(project, volume)
            if outcome is not None:
                waiting.remove(volume)
                show(outcome)
        return not waiting

    if timeout <= 0:
        await _watch(client, name, done)
        return waiting
    with suppress(TimeoutError):
        await run_within(SystemClock(), _watch(client, name, done), timeout)
    return waiting


def _reporter(*, restored: bool) -> tuple[Callable[[Outcome], None], list[str]]:
    """A `show` for `wait_outcomes` printing snapshots on stdout and errors on stderr, and the failed volumes."""
    failed: list[str] = []

    def show(outcome: Outcome) -> None:
        if outcome.error:
            failed.append(outcome.volume)
            click.echo(f"error: {outcome.volume}: {outcome.error}", err=True)
        else:
            click.echo(snapshot_line(outcome, SystemClock().now(), restored=restored))

    return show, failed


async def _backup(settings: Settings, name: str, volume: str, wait: float | None) -> None:
    async with settings.client() as client:
        now = SystemClock().now()
        try:
            _, volumes = await volumeops.request_backup(client, name, volume, now=now)
        except NotFound:
            raise not_found("projects", name) from None
        click.echo(f"project/{name} backup requested ({', '.join(volumes)})")
        if wait is None:
            return
        stamp = timestamp(now)
        show, failed = _reporter(restored=False)
        late = await wait_outcomes(
            client, name, volumes, lambda p, v: volumeops.backup_outcome(p, v, stamp), timeout=wait, show=show
        )
    _finish(name, late, failed, "backup")


def _finish(name: str, late: list[str], failed: list[str], what: str) -> None:
    if late:
        raise CommandError(
            f"error: timed out waiting for the {what} of {', '.join(late)} (project/{name}: its node has not "
            "handled the request)"
        )
    if failed:
        raise PartialFailure()


@click.command("backup")
@click.argument("project", shell_complete=complete_names)
@click.option("--volume", default="", metavar="V", help="Only this volume (default: every backed-up volume).")
@click.option("--wait", is_flag=True, help="Wait until the node took the backups; print each snapshot or error.")
@click.option(
    "--timeout", default=DEFAULT_TIMEOUT, show_default=True, help="With --wait: give up after this long (0: never)."
)
@pass_settings
def backup(settings: Settings, project: str, volume: str, wait: bool, timeout: str) -> None:
    """Take a backup of PROJECT's backed-up volumes now (stamps spec.volumes[].backup.requestedAt).

    The agent of the project's node runs the backup at once, besides the regular ones every `every`.
    """
    seconds_ = _parse_timeout(timeout)
    run(_backup(settings, project, volume, seconds_ if wait else None))


async def _restore(settings: Settings, name: str, volume: str, snapshot: str, wait: float | None) -> None:
    async with settings.client() as client:
        now = SystemClock().now()
        try:
            _, record = await volumeops.request_restore(client, name, volume, snapshot, now=now)
        except NotFound:
            raise not_found("projects", name) from None
        click.echo(f"project/{name} restore of volume {volume} from snapshot {short_id(record.id)} requested")
        if wait is None:
            return
        stamp = timestamp(now)
        show, failed = _reporter(restored=True)
        late = await wait_outcomes(
            client,
            name,
            [volume],
            lambda p, v: volumeops.restore_outcome(p, v, stamp, record.id),
            timeout=wait,
            show=show,
        )
    _finish(name, late, failed, "restore")


@click.command("restore")
@click.argument("project", shell_complete=complete_names)
@click.option("--volume", required=True, metavar="V", help="The backed-up volume to restore.")
@click.option(
    "--snapshot", required=True, metavar="ID", help="Snapshot id, or a unique prefix of at least 8 hex digits."
)
@click.option("--wait", is_flag=True, help="Wait until the node restored it (or failed to).")
@click.option(
    "--timeout", default=DEFAULT_TIMEOUT, show_default=True, help="With --wait: give up after this long (0: never)."
)
@pass_settings
def restore(settings: Settings, project: str, volume: str, snapshot: str, wait: bool, timeout: str) -> None:
    """Restore volume V of PROJECT from snapshot ID (see `caractrl get snapshots PROJECT`).

    The node stops the services that mount the volume, restores the snapshot into a new copy and starts them
    again. The id is checked against the volume's recorded snapshots first; nothing is written when it is unknown
    or ambiguous.
    """
    seconds_ = _parse_timeout(timeout)
    run(_restore(settings, project, volume, snapshot, seconds_ if wait else None))


for _command in (backup, restore):
    # a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
    _command.fixed_resource = "projects"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute

__all__ = ["DEFAULT_TIMEOUT", "backup", "restore", "snapshot_line", "wait_outcomes"]
