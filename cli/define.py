"""`caractrl define --proto FILE --kind K --group G`: a ResourceDefinition from a .proto file.

    caractrl define --proto webfarm.proto --kind WebFarm --group example.com --short-name wf \\
        --column READY=.status.readyReplicas
    caractrl define --proto webfarm.proto --kind WebFarm --group example.com -o yaml > definition.yaml
    caractrl define --proto webfarm.proto --kind WebFarm --group example.com --rules rules.yaml

`--rules FILE` reads a YAML or JSON file with the definition's `fieldRules`, `validations` (CEL),
`admissionHooks`, `versions` and `conversion`, written as in the definition manifest (docs/custom-kinds.md).

The file is compiled with grpcio-tools (the `proto` extra); the definition is applied to the server (created, or
updated when it differs), or printed as a manifest with `-o yaml|json` (the schema embedded as base64).

Re-defining is like `apply`: names not given keep their stored value (`--short-name`, `--column` and
`--node-verb` left out keep the stored short names, printer columns and node verbs; giving any replaces that list),
and the reply says what changed (`resourcedefinition/backups.ops.example.com configured: schema, printerColumns`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from caravanserai import v1
from caravanserai.cli.common import pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.cli.printers import render_objects
from caravanserai.client.definitions import apply_definition
from caravanserai.customkinds.protoc import ProtocError, compile_proto
from caravanserai.customkinds.schemas import KindNames, definition_from_schema
from caravanserai.errors import Invalid, NotFound
from caravanserai.text.protojson import from_data

RULE_KEYS = ("fieldRules", "validations", "admissionHooks", "versions", "conversion")


def _columns(values: Sequence[str]) -> list[tuple[str, str]]:
    columns = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path.startswith("."):
            raise click.BadParameter(
                f"{value!r}: use NAME=.json.path, e.g. READY=.status.readyReplicas", param_hint="'--column'"
            )
        columns.append((name, path))
    return columns


def _rules(path: str) -> v1.ResourceDefinitionSpec:
    """The fieldRules, validations and admissionHooks of the file at `path` (CommandError naming the field)."""
    try:
        with open(path, encoding="utf-8") as f:
            data: Any = YAML(typ="safe").load(f)
    except (OSError, YAMLError) as exc:
        raise CommandError(f"error: --rules {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not set(data) <= set(RULE_KEYS):
        raise CommandError(f"error: --rules {path}: must be a mapping with only {', '.join(RULE_KEYS)}")
    try:
        return from_data(data, v1.ResourceDefinitionSpec)
    except Invalid as exc:
        raise CommandError(f"error: --rules {path}: {'; '.join(str(v) for v in exc.violations)}") from None


@click.command("define")
@click.option("--proto", "proto", required=True, metavar="FILE", help="The .proto file with the kind's messages.")
@click.option("--kind", required=True, help="The object message (and kind name), e.g. WebFarm.")
@click.option("--group", required=True, help="API group, e.g. example.com (apiVersion becomes <group>/v1).")
@click.option("--plural", default="", help="Plural resource name (default: lowercase kind + s).")
@click.option(
    "--short-name", "short_names", multiple=True, help="Short name for caractrl (repeatable; left out: kept)."
)
@click.option(
    "--column",
    "columns",
    multiple=True,
    metavar="NAME=PATH",
    help="Printer column for `caractrl get`, e.g. READY=.status.readyReplicas (repeatable; when re-defining, "
    "left out: the stored columns are kept).",
)
@click.option(
    "--node-verb", "node_verbs", multiple=True, help="A verb node identities may use (repeatable; left out: kept)."
)
@click.option(
    "--rules",
    "rules",
    default=None,
    metavar="FILE",
    help="YAML/JSON file with fieldRules, validations (CEL), admissionHooks, versions and conversion for the kind.",
)
@click.option("-I", "--include", "includes", multiple=True, metavar="DIR", help="Further import directories.")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    default=None,
    help="Print the ResourceDefinition manifest instead of applying it.",
)
@pass_settings
def define(
    settings: Settings,
    proto: str,
    kind: str,
    group: str,
    plural: str,
    short_names: Sequence[str],
    columns: Sequence[str],
    node_verbs: Sequence[str],
    rules: str | None,
    includes: Sequence[str],
    output: str | None,
) -> None:
    """Define a custom kind from a .proto file (needs grpcio-tools)."""
    try:
        schema = compile_proto(proto, include=includes)
        names = KindNames.of(
            kind,
            group=group,
            plural=plural,
            short_names=short_names,
            printer_columns=_columns(columns),
            node_verbs=node_verbs,
        )
        definition = definition_from_schema(schema, names)
    except (ProtocError, ValueError) as exc:
        raise CommandError(f"error: {exc}") from None
    if rules:
        definition.spec.MergeFrom(_rules(rules))
    if output:
        click.echo(render_objects([definition], output, single=True), nl=False)
        return
    options = {"short_names": short_names, "printer_columns": columns, "node_verbs": node_verbs}
    given = {field for field, values in options.items() if values} | (set(_RULES) if rules else set())
    run(_apply(settings, definition, given))


_LISTS = ("short_names", "printer_columns", "node_verbs")
"""The definition's list fields that `define` takes from repeatable options."""
_RULES = ("field_rules", "validations", "admission_hooks", "versions", "conversion")
"""The definition's fields that `define` takes from `--rules FILE` (all of them, or none when it is not given)."""
_SHOWN = {
    "schema": "schema",
    "short_names": "shortNames",
    "printer_columns": "printerColumns",
    "node_verbs": "nodeVerbs",
    "field_rules": "fieldRules",
    "validations": "validations",
    "admission_hooks": "admissionHooks",
    "versions": "versions",
    "conversion": "conversion",
}


def keep_unset(definition: v1.ResourceDefinition, before: v1.ResourceDefinition, given: set[str]) -> None:
    """Give `definition` the stored value of every list field whose option was not given, and the stored rules,
    hooks and versions without `--rules` (as apply keeps fields a manifest leaves out)."""
    for field in _LISTS + _RULES:
        if field not in given:
            definition.spec.ClearField(field)  # type: ignore[arg-type]  # a field name of ResourceDefinitionSpec
            if field == "conversion":
                if before.spec.HasField("conversion"):
                    definition.spec.conversion.CopyFrom(before.spec.conversion)
            else:
                getattr(definition.spec, field).extend(getattr(before.spec, field))


def changes(before: v1.ResourceDefinition, after: v1.ResourceDefinition) -> list[str]:
    """The names of the spec fields that differ, as the reply lists them."""
    return [shown for field, shown in _SHOWN.items() if getattr(before.spec, field) != getattr(after.spec, field)]


async def _apply(settings: Settings, definition: v1.ResourceDefinition, given: set[str]) -> None:
    async with settings.client() as client:
        before: v1.ResourceDefinition | None
        try:
            before = await client.resourcedefinitions.get(definition.metadata.name)
        except NotFound:
            before = None
        if before is not None:
            keep_unset(definition, before, given)
        stored = await apply_definition(client.resourcedefinitions, definition)
    if before is None:
        click.echo(f"resourcedefinition/{stored.metadata.name} created")
    elif stored.metadata.resource_version == before.metadata.resource_version:
        click.echo(f"resourcedefinition/{stored.metadata.name} unchanged")
    else:
        click.echo(f"resourcedefinition/{stored.metadata.name} configured: {', '.join(changes(before, stored))}")


__all__ = ["changes", "define", "keep_unset"]
