"""`caractrl apply -f FILE|DIR|-`: create or update projects, nodes, secrets and configs from manifests, kubectl-style.

    caractrl apply -f web.yaml -f nodes/          # repeatable; directories read *.yaml, *.yml, *.json by name
    cat web.yaml | caractrl apply -f -
    caractrl apply -f compose.yaml                # a Compose file (or a folder holding compose.yaml), converted

Per object it prints `project/web created`, `project/web configured` or `project/web unchanged`, and after a
`configured` one line per field the three-way merge removed from the live object, e.g.
`node/n1: spec.taints[dedicated] removed (not in the applied manifest)` (on stderr with `-o json|yaml|name`).

How an update is computed (kubectl's client-side apply: the last-applied annotation, a three-way merge of labels,
annotations and top-level spec fields, status never written, Conflict retried) is written once, in
`caravanserai.client.apply`, which the dashboard uses too.

An object of a namespaced kind without `metadata.namespace` goes into `-n`'s namespace (else the config file's, else
`default`); one that names another namespace than an explicit `-n` is refused (kubectl's rule), naming the field.

A Compose file (by its content: `services:` at the top, no `kind:`) is applied as the Project `caractrl convert`
prints, with its `warning:` lines on stderr (`cli/manifests.py`).

A document that cannot be read or is refused is reported (file, document, field path) and the others are
still applied; the exit status is then 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from caravanserai import meta
from caravanserai.cli.common import output_option, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError, PartialFailure, invalid, one_line, reason, report
from caravanserai.cli.manifests import read_manifests
from caravanserai.cli.printers import render_objects, resource_name
from caravanserai.cli.resources import discover_kinds
from caravanserai.client import Client
from caravanserai.client.apply import (
    APPLICABLE,
    LAST_APPLIED,
    Applied,
    applicable,
    apply_object,
    merged,
)
from caravanserai.errors import ApiError, Invalid, Unavailable
from caravanserai.text.manifestfiles import Document


def failure_line(doc: Document, exc: ApiError) -> str:
    """`Error from server (Invalid): web.yaml, document 2, line 9: project "web" is invalid: spec…: is required`
    (the line of the first field at fault, where the manifest has it; else where the document starts)."""
    kind = meta.kind_of(doc.object).kind
    message = invalid(kind, meta.name_of(doc.object), exc) if isinstance(exc, Invalid) else exc.message
    fields = [v.field for v in exc.violations if v.field] if isinstance(exc, Invalid) else []
    origin = doc.origin_of(fields[0]) if fields else doc.origin
    return one_line(f"Error from server ({reason(exc)}): {origin}: {message}")


def namespace_mismatch(doc: Document, requested: str | None) -> str | None:
    """kubectl's refusal of an object of a namespaced kind whose `metadata.namespace` differs from an explicit
    `-n` (None: no `-n`, a cluster-wide kind, or no namespace in the manifest, which then goes into `-n`)."""
    declared = doc.object.metadata.namespace
    if requested is None or not declared or declared == requested or meta.kind_of(doc.object).cluster_scoped:
        return None
    return (
        f"error: {doc.origin}: the namespace from the provided object {declared!r} does not match the namespace "
        f"{requested!r} sent on the request (metadata.namespace)"
    )


async def apply_documents(
    client: Client, documents: Sequence[Document], *, dry_run: bool, requested: str | None = None
) -> tuple[list[Applied], bool]:
    """Apply each document in order; report failures and go on. Returns (outcomes, failed). `requested`: the
    namespace given with `-n` (objects naming another one are refused, see `namespace_mismatch`)."""
    outcomes: list[Applied] = []
    failed = False
    for doc in documents:
        kind = meta.kind_of(doc.object)
        if not applicable(kind):
            report(
                ValueError(
                    f"{doc.origin}: kind {kind.kind} cannot be applied (only Project, Node, Secret, Config, "
                    "Namespace, ResourceDefinition and custom kinds)"
                )
            )
            failed = True
            continue
        mismatch = namespace_mismatch(doc, requested)
        if mismatch is not None:
            click.echo(mismatch, err=True)
            failed = True
            continue
        try:
            outcomes.append(await apply_object(client, doc.object, dry_run=dry_run))
        except Unavailable:
            raise
        except ApiError as exc:
            click.echo(failure_line(doc, exc), err=True)
            failed = True
    return outcomes, failed


@click.command("apply")
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    required=True,
    metavar="FILE|DIR|-",
    help="Manifest file, directory of manifests, Compose file (or a folder with compose.yaml), or - for stdin "
    "(repeatable).",
)
@output_option()
@click.option("--dry-run", is_flag=True, help="Show what would happen without writing anything.")
@pass_settings
def apply(settings: Settings, filenames: Sequence[str], output: str | None, dry_run: bool) -> None:
    """Create or update projects, nodes, secrets, configs, admissionpolicies, resourcedefinitions and objects of
    custom kinds from YAML or JSON manifests, and projects from Compose files (converted as `caractrl convert`
    shows)."""
    run(_apply(settings, filenames, settings.output_format(output).lower(), dry_run))


async def _apply(settings: Settings, filenames: Sequence[str], fmt: str, dry_run: bool) -> None:
    await discover_kinds(settings)
    documents, failed = read_manifests(filenames)
    if not documents and not failed:
        raise CommandError("error: no objects passed to apply")
    outcomes: list[Applied] = []
    if documents:
        async with settings.client() as client:
            outcomes, refused = await apply_documents(client, documents, dry_run=dry_run, requested=settings.namespace)
        failed = failed or refused
    _print(outcomes, fmt, dry_run=dry_run)
    if failed:
        raise PartialFailure()


def _print(outcomes: Sequence[Applied], fmt: str, *, dry_run: bool) -> None:
    table = fmt in ("table", "wide")
    if table:
        suffix = " (dry run)" if dry_run else ""
        for outcome in outcomes:
            click.echo(f"{resource_name(outcome.object)} {outcome.action}{suffix}")
            _print_removed(outcome, err=False)
    elif outcomes:
        click.echo(render_objects([o.object for o in outcomes], fmt, single=len(outcomes) == 1), nl=False)
        for outcome in outcomes:
            _print_removed(outcome, err=True)


def _print_removed(outcome: Applied, *, err: bool) -> None:
    """One line per field the merge removed (after the object's line; on stderr beside -o json/yaml/name)."""
    for path in outcome.removed:
        click.echo(f"{resource_name(outcome.object)}: {path} removed (not in the applied manifest)", err=err)


__all__ = ["APPLICABLE", "LAST_APPLIED", "Applied", "apply", "apply_documents", "apply_object", "merged"]
