"""`caractrl delete`: remove projects, nodes, Secrets, Configs and other objects by name, selector or manifest.

    caractrl delete project web db
    caractrl delete -f web.yaml
    caractrl delete project -l app=web --wait --timeout 2m
    caractrl delete node n1                 # refused while projects are bound to it (drain first)
    caractrl delete secret db-creds         # refused while a project references it (--force: anyway)

An active project (Scheduled, Running) is first marked Terminating — its agent removes the containers, then the record
goes: `project/web marked for deletion (Terminating)`. Pending and Failed projects go at once: `project/web deleted`. An
object with finalizers is only marked (deletion requested) and stays until the last finalizer is removed: `project/web
marked for deletion (stays Pending until its finalizers are removed: example.com/backup)`; a Pending project so marked
is no longer scheduled. `--force` removes the record at once in every case (containers still running on a live node are
then cleaned up by its agent's fencing). `--wait` blocks until the records are gone (`--timeout`, default 60s) and then
prints `deleted`.

`--volumes` (projects) also removes their Persistent volumes, the data, on their node: the project is annotated
`caravanserai.io/delete-volumes: "true"` before the Delete and its agent removes them as it terminates it (with
`--force`, refused: no agent would). A project not bound to a node has no agent to do it: a warning says so.

A Secret or Config is refused while a project references it (and a Secret while a BackupRepository names it), in one
line naming them (`KindView.users`, `cli/kinds/users.py`): a check of the CLI, made just before the delete, as
kubectl's; `--force` deletes it anyway (the projects' services then wait for it, as for a missing one).

`--cascade=background|foreground|orphan` (kubectl's flag) sends the Delete's propagation policy, for the objects'
dependents (objects whose ownerReferences name them): background (default) deletes the object now and the garbage
collector its dependents after; foreground marks it (finalizer `foregroundDeletion`) until the collector has deleted
the dependents with blockOwnerDeletion; orphan (finalizer `orphan`) keeps the dependents, without the reference.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from caravanserai import meta, v1
from caravanserai.cli.apply import namespace_mismatch
from caravanserai.cli.common import complete_names, complete_resource, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError, PartialFailure, not_found, report
from caravanserai.cli.kinds import plurals, view_of
from caravanserai.cli.manifests import read_manifests
from caravanserai.cli.resources import CUSTOM_KINDS, discover_kinds, is_allowed, parse_target
from caravanserai.cli.scope import nothing_found, scoped
from caravanserai.cli.wait import Condition, timeout_message, wait_all
from caravanserai.client import Client
from caravanserai.errors import CaravanseraiError, NotFound
from caravanserai.text.durations import parse_duration

DELETABLE = (*plurals(lambda view: view.deletable), CUSTOM_KINDS)
DEFAULT_TIMEOUT = "60s"
CASCADE = {
    "background": meta.PROPAGATION_BACKGROUND,
    "foreground": meta.PROPAGATION_FOREGROUND,
    "orphan": meta.PROPAGATION_ORPHAN,
}
"""`--cascade` values (kubectl's) and the propagation policy each sends."""
GONE = Condition("delete", lambda obj: obj is None, wants_absent=True)


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    force: bool = False
    wait: bool = False
    timeout: float = 60.0
    ignore_not_found: bool = False
    volumes: bool = False  # projects: their Persistent volumes go too (`KindView.with_volumes`)
    propagation_policy: str = ""  # `--cascade`: Background (""), Foreground or Orphan (`meta.PROPAGATION_*`)


@dataclass(frozen=True, slots=True)
class Target:
    """One object to delete: in `namespace` (a manifest's `metadata.namespace`), else in the command's."""

    kind: meta.Kind
    name: str
    namespace: str = ""

    @property
    def ref(self) -> str:
        """The name, or the key "namespace/name" when the target names its namespace (what clients look up)."""
        return meta.join_key(self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.kind.kind.lower()}/{self.name}"


@click.command("delete")
@click.argument("resource", required=False, shell_complete=complete_resource)
@click.argument("names", nargs=-1, shell_complete=complete_names)
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    metavar="FILE|DIR|-",
    help="Delete the objects named in these manifests (repeatable).",
)
@click.option("-l", "--selector", "label_selector", default="", help="Delete every object matching this selector.")
@click.option(
    "--force",
    is_flag=True,
    help="Remove the records at once, skipping Terminating; delete a Secret or Config even while projects use it.",
)
@click.option("--wait/--no-wait", default=False, show_default=True, help="Wait until the records are gone.")
@click.option("--timeout", default=DEFAULT_TIMEOUT, show_default=True, help="How long --wait waits (0: forever).")
@click.option("--ignore-not-found", is_flag=True, help="Missing objects are not an error.")
@click.option(
    "--volumes",
    is_flag=True,
    help="Projects: also remove their Persistent volumes (their data) on their node, as the agent terminates them.",
)
@click.option(
    "--cascade",
    type=click.Choice(CASCADE, case_sensitive=False),
    default="background",
    show_default=True,
    help="What becomes of the objects' dependents (ownerReferences): background (deleted by the garbage collector "
    "after the object), foreground (the object stays until they are gone) or orphan (they stay, without the "
    "reference).",
)
@pass_settings
def delete(
    settings: Settings,
    resource: str | None,
    names: Sequence[str],
    filenames: Sequence[str],
    label_selector: str,
    force: bool,
    wait: bool,
    timeout: str,
    ignore_not_found: bool,
    volumes: bool,
    cascade: str,
) -> None:
    """Delete projects, nodes, secrets, configs, backuprepositories, admissionpolicies, resourcedefinitions or custom
    objects.

    A Secret or Config that a project still references is refused, naming those projects, unless --force.
    """
    try:
        opts = DeleteOptions(force, wait, parse_duration(timeout), ignore_not_found, volumes, CASCADE[cascade.lower()])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--timeout'") from None
    if volumes and force:
        raise click.UsageError(
            "--volumes cannot be combined with --force: a forced delete removes the record at once, and the agent "
            "removes the volumes only as it terminates the project"
        )
    if filenames:
        if resource or names or label_selector:
            raise click.UsageError("give either -f FILE or RESOURCE NAME…/-l, not both")
        run(_delete_files(settings, filenames, opts))
        return
    if not resource:
        raise click.UsageError("give RESOURCE NAME…, RESOURCE -l SELECTOR or -f FILE")
    kind, wanted = parse_target(resource, names, allowed=DELETABLE)
    if bool(wanted) == bool(label_selector):
        raise click.UsageError("give either names or a selector (-l)")
    run(_delete_named(settings, kind, wanted, label_selector, opts))


async def _delete_named(
    settings: Settings, kind: meta.Kind, names: list[str], selector: str, opts: DeleteOptions
) -> None:
    async with settings.client() as client:
        if selector:
            page = await scoped(client, kind).list(label_selector=selector)
            names = sorted(o.metadata.name for o in page.items)
            if not names:
                click.echo(nothing_found(client, kind), err=True)
                return
        failed = await delete_targets(client, [Target(kind, n) for n in names], opts)
    if failed:
        raise PartialFailure()


async def _delete_files(settings: Settings, sources: Sequence[str], opts: DeleteOptions) -> None:
    await discover_kinds(settings)
    documents, failed = read_manifests(sources)
    targets = []
    for doc in documents:
        kind = meta.kind_of(doc.object)
        if not is_allowed(kind, DELETABLE):
            report(ValueError(f"{doc.origin}: {kind.kind} objects cannot be deleted with caractrl"))
            failed = True
            continue
        mismatch = namespace_mismatch(doc, settings.namespace)
        if mismatch is not None:
            click.echo(mismatch, err=True)
            failed = True
            continue
        namespace = "" if kind.cluster_scoped else doc.object.metadata.namespace
        targets.append(Target(kind, meta.name_of(doc.object), namespace))
    if targets:
        async with settings.client() as client:
            failed = await delete_targets(client, targets, opts) or failed
    if failed:
        raise PartialFailure()


async def delete_targets(client: Client, targets: Sequence[Target], opts: DeleteOptions) -> bool:
    """Delete each target, reporting failures one by one; wait for the records when asked. True if any failed."""
    failed = False
    pending: list[Target] = []
    for target in targets:
        if not opts.force and await _in_use(client, target):
            failed = True
            continue
        try:
            response = await _delete_one(client, target, opts)
        except NotFound:
            if not opts.ignore_not_found:
                report(not_found(target.kind.plural, target.name))
                failed = True
            continue
        except (CaravanseraiError, ValueError) as exc:
            report(exc)
            failed = True
            continue
        if response.deleted:
            cascaded = f" with {response.deleted_instances} object(s) of its kind" if response.deleted_instances else ""
            click.echo(f"{target} deleted{cascaded}")
        elif opts.wait:
            pending.append(target)
        else:
            obj = meta.unwrap(response.object)
            note = view_of(target.kind).deletion_note
            click.echo(f"{target} marked for deletion ({await note(client, obj) if note else deletion_state(obj)})")
    if pending:
        failed = await _wait_gone(client, pending, opts.timeout) or failed
    return failed


async def _delete_one(client: Client, target: Target, opts: DeleteOptions) -> v1.DeleteResponse:
    """Delete `target`; with `--volumes` marked first (`KindView.with_volumes`), the mark taken back when the
    Delete fails (a later plain delete must keep the data). ValueError for a kind without volumes."""
    resources = scoped(client, target.kind)
    policy = opts.propagation_policy
    if not opts.volumes:
        return await resources.delete(target.ref, force=opts.force, propagation_policy=policy)
    with_volumes = view_of(target.kind).with_volumes
    if with_volumes is None:
        raise ValueError(f"{target}: --volumes applies to projects only")
    warning = await with_volumes(client, target.ref)
    if warning:
        click.echo(warning, err=True)
    try:
        return await resources.delete(target.ref, force=opts.force, propagation_policy=policy)
    except CaravanseraiError:
        with contextlib.suppress(CaravanseraiError):
            await with_volumes(client, target.ref, on=False)
        raise


async def _in_use(client: Client, target: Target) -> bool:
    """Report and say whether `target` is still used (its kind's `users`: the projects reading a Secret, …)."""
    users = view_of(target.kind).users
    if users is None:
        return False
    try:
        using = await users(client, target.ref)
    except NotFound:
        return False
    if using:
        report(
            CommandError(
                f"error: {target} is used by {', '.join(using)}; change or delete them first, or use --force to "
                "delete it anyway"
            )
        )
    return bool(using)


def deletion_state(obj: Any) -> str:
    """What happens next to `obj`, marked for deletion but not yet removed, in a few words."""
    phase = getattr(getattr(obj, "status", None), "phase", "")
    if phase == v1.TERMINATING:
        return "Terminating"
    waiting = ", ".join(obj.metadata.finalizers)
    stays = f"stays {phase}" if phase else "stays"
    return f"{stays} until its finalizers are removed: {waiting}" if waiting else stays


async def _wait_gone(client: Client, targets: Sequence[Target], timeout: float) -> bool:
    """Wait until the records are gone, printing `deleted` for each; report those still there. True if any."""
    late: list[Target] = []
    for plural, namespace in sorted({(t.kind.plural, t.namespace) for t in targets}):
        of_kind = [t for t in targets if (t.kind.plural, t.namespace) == (plural, namespace)]
        resources = client.resource(plural, namespace=namespace or client.namespace)
        missing = await wait_all(resources, [t.name for t in of_kind], [GONE], timeout=timeout)
        late += [t for t in of_kind if t.name in missing]
        for target in of_kind:
            if target.name not in missing:
                click.echo(f"{target} deleted")
    for target in late:
        report(CommandError(timeout_message(target.kind.plural, [target.name])))
    return bool(late)


__all__ = ["CASCADE", "DELETABLE", "DeleteOptions", "Target", "delete", "delete_targets", "deletion_state"]
