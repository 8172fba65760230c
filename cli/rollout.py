"""`caractrl scale` and `caractrl rollout status|history|undo|pause|resume` for ProjectSets (kubectl's verbs for
Deployments).

    caractrl scale projectset/web --replicas 5            (also: scale projectsets web --replicas 5)
    caractrl rollout status projectset/web [--timeout 5m] [--watch=false]
    caractrl rollout history projectset/web [--revision 2]
    caractrl rollout undo projectset/web [--to-revision 2]
    caractrl rollout pause|resume projectset/web

* `scale`, `undo`, `pause` and `resume` are spec writes (read, change, write with the version read; read again on
  Conflict). `undo` writes the template of the revision asked for (default: the one before the current) back into
  `spec.template`; the controller rolls it out as a new revision, as Kubernetes does.
* `status` waits until the rollout is complete (every replica of the update revision and available), printing each
  new state as kubectl does; it exits 1 when the rollout failed (reason ProgressDeadlineExceeded) or `--timeout`
  passed; with `--no-watch` it prints the state once and exits 0 (kubectl's `--watch=false`).
"""

from __future__ import annotations

import asyncio

import click

from caravanserai import meta, v1
from caravanserai.cli.common import pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.cli.resources import get_object, modify, parse_target
from caravanserai.clock import SystemClock
from caravanserai.project.replicas import replicas_of, template_hash
from caravanserai.text.durations import parse_duration
from caravanserai.text.manifest import dump_yaml

SETS = meta.KINDS["projectsets"]
POLL = 0.5


def _target(resource: str, names: tuple[str, ...]) -> str:
    """The set's name from `projectset/NAME` or `projectset NAME`; a usage error otherwise."""
    _, found = parse_target(resource, names, allowed=(SETS.plural,))
    if len(found) != 1:
        raise click.UsageError("name exactly one projectset")
    return found[0]


# ---- scale ---------------------------------------------------------------------------------------------------


@click.command("scale")
@click.argument("resource")
@click.argument("names", nargs=-1)
@click.option("--replicas", type=click.IntRange(min=0), required=True, help="The new number of replicas.")
@pass_settings
def scale(settings: Settings, resource: str, names: tuple[str, ...], replicas: int) -> None:
    """Set spec.replicas of a ProjectSet (projectset/NAME or projectset NAME)."""
    name = _target(resource, names)

    def change(obj: v1.ProjectSet) -> bool:
        if obj.spec.HasField("replicas") and obj.spec.replicas == replicas:
            return False
        obj.spec.replicas = replicas
        return True

    async def body() -> bool:
        async with settings.client() as client:
            return (await modify(client.projectsets, name, change))[1]

    changed = run(body())
    click.echo(f"projectset/{name} scaled" if changed else f"projectset/{name} unchanged (already {replicas})")


# ---- rollout -------------------------------------------------------------------------------------------------


@click.group("rollout")
def rollout() -> None:
    """Follow and steer the rollouts of a ProjectSet: status, history, undo, pause, resume."""


def rollout_state(obj: v1.ProjectSet) -> tuple[bool, str]:
    """(done, the line to print) for the set's rollout (kubectl's wording); CommandError when it failed."""
    spec, status, name = obj.spec, obj.status, obj.metadata.name
    desired = replicas_of(spec)
    if obj.metadata.generation > status.observed_generation:
        return False, "Waiting for rollout to be observed by the controller..."
    progressing = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
    if progressing is not None and progressing.reason == v1.REASON_PROGRESS_DEADLINE_EXCEEDED:
        raise CommandError(f'error: projectset "{name}" exceeded its progress deadline: {progressing.message}')
    if spec.paused:
        return False, f'Waiting for rollout to finish: projectset "{name}" is paused (caractrl rollout resume)'
    if status.updated_replicas < desired:
        return False, (
            f"Waiting for rollout to finish: {status.updated_replicas} out of {desired} new replicas have been "
            "updated..."
        )
    if status.replicas > status.updated_replicas:
        old = status.replicas - status.updated_replicas
        return False, f"Waiting for rollout to finish: {old} old replicas are pending termination..."
    if status.available_replicas < status.updated_replicas:
        return False, (
            f"Waiting for rollout to finish: {status.available_replicas} of {status.updated_replicas} updated "
            "replicas are available..."
        )
    return True, f'projectset "{name}" successfully rolled out'


async def _follow(settings: Settings, name: str, *, timeout: float, watch: bool) -> None:
    clock = SystemClock()
    deadline, last = clock.now() + timeout, ""
    async with settings.client() as client:
        while True:
            done, line = rollout_state(await get_object(client.projectsets, name))
            if line != last:
                click.echo(line)
                last = line
            if done:
                return
            if not watch:
                return
            if clock.now() >= deadline:
                raise CommandError(f'error: timed out waiting for projectset "{name}" to roll out')
            await asyncio.sleep(POLL)


@rollout.command("status")
@click.argument("resource")
@click.argument("names", nargs=-1)
@click.option("--timeout", default="10m", show_default=True, help="Give up (exit 1) after this long.")
@click.option("--watch/--no-watch", "-w", default=True, show_default=True, help="Wait until the rollout ends.")
@pass_settings
def status(settings: Settings, resource: str, names: tuple[str, ...], timeout: str, watch: bool) -> None:
    """Wait until the rollout of a ProjectSet is complete; exit 1 when it failed (or after --timeout)."""
    name = _target(resource, names)
    try:
        seconds = parse_duration(timeout)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timeout'") from None
    run(_follow(settings, name, timeout=seconds, watch=watch))


@rollout.command("history")
@click.argument("resource")
@click.argument("names", nargs=-1)
@click.option("--revision", type=int, default=0, help="Show the template of this revision.")
@pass_settings
def history(settings: Settings, resource: str, names: tuple[str, ...], revision: int) -> None:
    """The revisions kept of a ProjectSet (spec.revisionHistoryLimit), or the template of one."""
    name = _target(resource, names)

    async def body() -> v1.ProjectSet:
        async with settings.client() as client:
            obj: v1.ProjectSet = await get_object(client.projectsets, name)
            return obj

    obj = run(body())
    if revision:
        click.echo(dump_yaml([_revision(obj, revision).template]), nl=False)
        return
    click.echo(f"projectset/{name}")
    click.echo(f"{'REVISION':<10}{'HASH':<12}{'CREATED':<22}ROLE")
    for entry in obj.status.revisions:
        role = "update" if entry.hash == obj.status.update_revision else ""
        role = "current" if entry.hash == obj.status.current_revision and not role else role
        created = entry.created.ToDatetime().strftime("%Y-%m-%dT%H:%M:%SZ")
        click.echo(f"{entry.revision:<10}{entry.hash:<12}{created:<22}{role}".rstrip())


def _revision(obj: v1.ProjectSet, number: int) -> v1.ProjectSetRevision:
    for entry in obj.status.revisions:
        if entry.revision == number:
            return entry
    kept = ", ".join(str(r.revision) for r in obj.status.revisions) or "none"
    raise CommandError(f"error: projectset/{obj.metadata.name} has no revision {number} (kept: {kept})")


def undo_target(obj: v1.ProjectSet, to_revision: int) -> v1.ProjectSetRevision:
    """The revision `undo` goes back to: `to_revision`, or the newest one older than the spec's template."""
    if to_revision:
        return _revision(obj, to_revision)
    current = template_hash(obj.spec.template)
    numbers = {r.hash: r.revision for r in obj.status.revisions}
    below = [r for r in obj.status.revisions if r.revision < numbers.get(current, 1 << 62) and r.hash != current]
    if not below:
        raise CommandError(f"error: projectset/{obj.metadata.name} has no previous revision to go back to")
    return max(below, key=lambda r: r.revision)


@rollout.command("undo")
@click.argument("resource")
@click.argument("names", nargs=-1)
@click.option("--to-revision", type=int, default=0, help="The revision to go back to (default: the previous one).")
@pass_settings
def undo(settings: Settings, resource: str, names: tuple[str, ...], to_revision: int) -> None:
    """Roll a ProjectSet back to an earlier revision's template."""
    name = _target(resource, names)
    chosen: list[int] = []

    def change(obj: v1.ProjectSet) -> bool:
        target = undo_target(obj, to_revision)
        chosen[:] = [target.revision]
        if template_hash(obj.spec.template) == target.hash:
            return False
        obj.spec.template.CopyFrom(target.template)
        return True

    async def body() -> bool:
        async with settings.client() as client:
            return (await modify(client.projectsets, name, change))[1]

    if run(body()):
        click.echo(f"projectset/{name} rolled back (to revision {chosen[0]})")
    else:
        click.echo(f"projectset/{name} skipped rollback (the template already matches revision {chosen[0]})")


def _pausing(paused: bool, word: str) -> click.Command:
    @click.argument("resource")
    @click.argument("names", nargs=-1)
    @pass_settings
    def command(settings: Settings, resource: str, names: tuple[str, ...]) -> None:
        name = _target(resource, names)

        def change(obj: v1.ProjectSet) -> bool:
            if obj.spec.paused == paused:
                return False
            obj.spec.paused = paused
            return True

        async def body() -> bool:
            async with settings.client() as client:
                return (await modify(client.projectsets, name, change))[1]

        changed = run(body())
        click.echo(f"projectset/{name} {word}" if changed else f"projectset/{name} is already {word}")

    command.__doc__ = f"Mark a ProjectSet {word} (spec.paused={str(paused).lower()})."
    return click.command(word.removesuffix("d"))(command)


rollout.add_command(_pausing(True, "paused"))
rollout.add_command(_pausing(False, "resumed"))

__all__ = ["history", "rollout", "rollout_state", "scale", "status", "undo", "undo_target"]
