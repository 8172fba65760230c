"""caractrl output: table layout, cells, describe coverage of every field, and the JSON Schema generator."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from caravanserai import meta, v1
from caravanserai.cli.describe_node import describe_node
from caravanserai.cli.describe_project import describe_project
from caravanserai.cli.get import GetOptions, WatchPrinter
from caravanserai.cli.kinds import VIEWS, rows
from caravanserai.cli.kinds.node import throughput_text
from caravanserai.cli.layout import Writer, events_about
from caravanserai.cli.printers import (
    TableWriter,
    age,
    key_values,
    list_dict,
    object_dict,
    render_table,
    resource_name,
    when,
)
from caravanserai.cli.schema import documented_values, kind_schema
from caravanserai.cli.tables import RowContext, project_reason
from caravanserai.client import Change
from caravanserai.client.agentlogs import node_address
from caravanserai.clock import rfc3339, timestamp
from caravanserai.testing import builders

NOW = 1_800_000_000.0


# ---- tables ---------------------------------------------------------------------------------------------------


def test_render_table_pads_every_column_but_the_last_by_three_spaces() -> None:
    assert render_table(["NAME", "PHASE"], [["web", "Running"], ["a-longer-name", "Pending"]]) == [
        "NAME            PHASE",
        "web             Running",
        "a-longer-name   Pending",
    ]


def test_render_table_strips_trailing_blanks() -> None:
    assert render_table(["A", "B"], [["x", ""]]) == ["A   B", "x"]


def test_table_writer_keeps_columns_aligned_and_widens_when_needed() -> None:
    writer = TableWriter(["NAME", "PHASE"])
    assert writer.lines([["web", "Pending"]]) == ["NAME   PHASE", "web    Pending"]
    assert writer.lines([["db", "Running"]]) == ["db     Running"]
    assert writer.lines([["much-longer", "Running"]]) == ["much-longer   Running"]


def test_table_writer_without_headers() -> None:
    assert TableWriter(["NAME"], show_headers=False).lines([["web"]]) == ["web"]


@pytest.mark.parametrize(
    ("delta", "text"), [(0, "0s"), (5, "5s"), (119, "119s"), (180, "3m"), (3 * 3600, "3h"), (5 * 86400, "5d")]
)
def test_age(delta: float, text: str) -> None:
    assert age(timestamp(NOW - delta), NOW) == text


def test_unset_times() -> None:
    assert age(v1.Project().metadata.creation_timestamp, NOW) == "<unknown>"
    assert when(v1.Project().metadata.creation_timestamp, NOW) == "<none>"
    assert when(timestamp(NOW - 60), NOW) == f"{rfc3339(timestamp(NOW - 60))} (60s ago)"


def test_key_values_sorted_or_none() -> None:
    assert key_values({"b": "2", "a": "1"}) == "a=1,b=2"
    assert key_values({}) == "<none>"


def test_resource_name_and_list_kind() -> None:
    project = builders.project("web")
    assert resource_name(project) == "project/web"
    assert list_dict([project])["kind"] == "ProjectList"
    assert list_dict([project, builders.node("n1")])["kind"] == "List"


def test_node_row_counts_projects_and_formats_quantities() -> None:
    node = builders.node_status(builders.node("n1", unschedulable=True), cpu="3500m", memory="7680Mi")
    node.metadata.creation_timestamp.CopyFrom(timestamp(NOW - 7200))
    ctx = RowContext(now=NOW)
    ctx.projects_per_node["n1"] = 3
    kind = meta.KINDS["nodes"]
    assert rows(kind, [node], ctx, wide=False) == [["n1", "Ready", "false", "3500m", "7.5Gi", "3", "2h"]]


def test_node_address_prefers_internal_ip() -> None:
    node = builders.node("n1")
    node.status.network.addresses.add(type="Hostname", address="n1.local")
    node.status.network.addresses.add(type="InternalIP", address="10.0.0.5")
    assert node_address(node) == "10.0.0.5"
    assert throughput_text(node) == "<none>"
    node.status.network.throughput.download = "1Mi"
    node.status.network.throughput.upload = "512Ki"
    assert throughput_text(node) == "↓1Mi/s ↑512Ki/s"


def test_project_reason_prefers_unschedulable_while_pending() -> None:
    project = builders.project("web")
    meta.set_phase(project, v1.PENDING, reason="Created", message="accepted", now=NOW)
    meta.set_condition(
        project.status.conditions,
        v1.CONDITION_SCHEDULED,
        v1.FALSE,
        reason="Unschedulable",
        message="0/2 nodes are available",
        now=NOW,
    )
    cond = project_reason(project)
    assert cond is not None and cond.reason == "Unschedulable"
    row = VIEWS["projects"].columns.row(project, RowContext(now=NOW), True)
    assert row[-2:] == ["Unschedulable", "0/2 nodes are available"]


def test_writer_aligns_keys_and_continues_multiline_values() -> None:
    out = Writer()
    out.fields([("Name", "web"), ("Labels", "a=1\nb=2")])
    assert out.lines == ["Name:    web", "Labels:  a=1", "         b=2"]


# ---- describe covers every field --------------------------------------------------------------------------------


class Filler:
    """Sets every field of a message to a distinct value (strings `x001q`, numbers 7001…, times, True)."""

    def __init__(self) -> None:
        self.counter = 0

    def next(self) -> int:
        self.counter += 1
        return self.counter

    def fill(self, message: Message) -> None:
        for field in message.DESCRIPTOR.fields:
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                getattr(message, field.name)[self.token()] = self.token()
            elif field.is_repeated and field.message_type is not None:
                self.fill_message(getattr(message, field.name).add())
            elif field.is_repeated:
                getattr(message, field.name).append(self.scalar(field))
            elif field.message_type is not None:
                self.fill_message(getattr(message, field.name))
            else:
                setattr(message, field.name, self.scalar(field))

    def fill_message(self, message: Message) -> None:
        if message.DESCRIPTOR.full_name == "google.protobuf.Timestamp":
            message.CopyFrom(timestamp(NOW - 60 * self.next()))
        else:
            self.fill(message)

    def token(self) -> str:
        return f"x{self.next():03d}q"

    def scalar(self, field: FieldDescriptor) -> object:
        if field.type == FieldDescriptor.TYPE_STRING:
            return self.token()
        if field.type == FieldDescriptor.TYPE_BOOL:
            return True
        return 7000 + self.next()


def leaf_paths(message: Message, prefix: str = "") -> Iterator[str]:
    """Dotted paths of every leaf field (the first element of repeated messages), timestamps as leaves."""
    for field in message.DESCRIPTOR.fields:
        path = f"{prefix}{field.name}"
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        is_time = field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp"
        if field.message_type is None or is_map or is_time:
            yield path
        elif field.is_repeated:
            yield from leaf_paths(getattr(message, field.name)[0], f"{path}.0.")
        else:
            yield from leaf_paths(getattr(message, field.name), f"{path}.")


def cleared(message: Message, path: str) -> Message:
    """A copy of `message` with the field at `path` cleared."""
    copy = type(message)()
    copy.CopyFrom(message)
    *parents, last = path.split(".")
    target: object = copy
    for part in parents:
        target = target[int(part)] if part.isdigit() else getattr(target, part)  # type: ignore[index]  # target walks a message: a repeated field or a message, typed object
    target.ClearField(last)  # type: ignore[attr-defined]  # target is a message by now, typed object
    return copy


# Fields describe deliberately does not show: the type meta (Kind: is printed from the message class).
NOT_SHOWN = {"api_version", "kind"}


def filled(cls: type[Message]) -> Message:
    obj = cls()
    Filler().fill(obj)
    return obj


def test_describe_project_shows_every_field() -> None:
    project = filled(v1.Project)
    render = lambda p: describe_project(p, [], NOW)  # noqa: E731
    full = render(project)
    missing = [p for p in leaf_paths(project) if p not in NOT_SHOWN and render(cleared(project, p)) == full]
    assert missing == []


def test_describe_node_shows_every_field_of_node_and_lease() -> None:
    node, lease = filled(v1.Node), filled(v1.Lease)
    full = describe_node(node, lease, [], [], NOW)
    missing = [
        p
        for p in leaf_paths(node)
        if p not in NOT_SHOWN and describe_node(cleared(node, p), lease, [], [], NOW) == full
    ]
    missing += [
        f"lease.{p}"
        for p in leaf_paths(lease.spec, "spec.")
        if describe_node(node, cleared(lease, p), [], [], NOW) == full
    ]
    assert missing == []


def test_describe_events_match_kind_name_and_uid() -> None:
    project = builders.project("web")
    project.metadata.uid = "u1"

    def event(kind: str, name: str, uid: str = "") -> v1.Event:
        e = v1.Event()
        e.spec.involved_object.kind, e.spec.involved_object.name, e.spec.involved_object.uid = kind, name, uid
        return e

    chosen = events_about([event("Project", "web"), event("Node", "web"), event("Project", "web", "old")], project)
    assert [(e.spec.involved_object.kind, e.spec.involved_object.uid) for e in chosen] == [("Project", "")]


def test_describe_pending_project_leads_with_the_reason() -> None:
    project = builders.project("big")
    meta.set_condition(
        project.status.conditions,
        v1.CONDITION_SCHEDULED,
        v1.FALSE,
        reason="Unschedulable",
        message="0/3 nodes are available: 3 insufficient memory",
        now=NOW,
    )
    project.status.phase = v1.PENDING
    head = describe_project(project, [], NOW).splitlines()[:5]
    assert head[3:] == [
        "Reason:               Unschedulable",
        "Message:              0/3 nodes are available: 3 insufficient memory",
    ]


# ---- schema -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "values"),
    [
        ('"Ready" or "NotReady".', ["Ready", "NotReady"]),
        ('"Always" (default), "OnFailure" or "Never".', ["Always", "OnFailure", "Never"]),
        ("NoSchedule, PreferNoSchedule or NoExecute.", ["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        ('"" or "Internal" (the only scope upstream implements) or "Public".', ["", "Internal", "Public"]),
        ("Docker state: created, running, restarting, exited, dead …", None),
        ("Name of a volume declared in spec.volumes.", None),
    ],
)
def test_documented_values(doc: str, values: list[str] | None) -> None:
    assert documented_values(doc) == values


def test_project_schema_shape() -> None:
    schema = kind_schema("projects")
    defs = schema["$defs"]
    project = defs["Project"]
    assert schema["$ref"] == "#/$defs/Project"
    assert project["required"] == ["apiVersion", "kind", "metadata", "spec"]
    assert project["properties"]["kind"]["const"] == "Project"
    assert defs["ObjectMeta"]["required"] == ["name"]
    assert defs["ObjectMeta"]["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    assert defs["ObjectMeta"]["properties"]["creationTimestamp"]["format"] == "date-time"
    assert defs["ObjectMeta"]["properties"]["generation"]["type"] == ["integer", "string"]
    assert defs["ProjectSpec"]["properties"]["services"]["minItems"] == 1
    assert defs["Service"]["properties"]["volumeMounts"]["items"] == {"$ref": "#/$defs/VolumeMount"}
    assert defs["ServicePort"]["properties"]["containerPort"]["maximum"] == 65535
    assert defs["ProjectStatus"]["properties"]["phase"]["enum"] == list(v1.PHASES)
    assert all(d["additionalProperties"] is False for d in defs.values())
    assert "Node" not in defs and "NodeSpec" not in defs


@pytest.mark.parametrize("message", ["Volume", "TmpfsMount"])
def test_the_schema_of_a_file_mode_takes_the_forms_the_server_reads_as_octal(message: str) -> None:
    """The schema's example (0400) is what the server accepts: in YAML 1.2 an editor reads it as 400, a string
    "0400" or "0o400" is octal too, a plain number decimal."""
    mode = kind_schema("projects")["$defs"][message]["properties"]["mode"]
    assert "0400" in mode["description"] or "01777" in mode["description"]
    assert mode["type"] == ["integer", "string"] and mode["minimum"] == 0 and mode["maximum"] >= 7777
    assert all(re.fullmatch(mode["pattern"], text) for text in ("0400", "0o400", "256", "01777"))
    assert not any(re.fullmatch(mode["pattern"], text) for text in ("0x1", "rw", "-1"))


def test_node_schema_has_taint_effects() -> None:
    defs = kind_schema("nodes")["$defs"]
    assert defs["Taint"]["properties"]["effect"]["enum"] == ["NoSchedule", "PreferNoSchedule", "NoExecute"]
    assert defs["Node"]["required"] == ["apiVersion", "kind", "metadata"]


# ---- watch output ---------------------------------------------------------------------------------------------


async def test_watch_printer_prefixes_events_and_keeps_alignment(capsys: pytest.CaptureFixture[str]) -> None:
    opts = GetOptions(meta.KINDS["projects"], [], "table", watch_events=True)
    printer = WatchPrinter(None, opts)  # type: ignore[arg-type]  # project rows look nothing up
    first, second = builders.project("web"), builders.project("a-much-longer-name")
    first.status.phase = second.status.phase = v1.PENDING
    await printer.print([Change(v1.ADDED, first)])
    await printer.print([Change(v1.DELETED, second)])
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in out] == [
        ["EVENT", "NAME", "PHASE"],
        ["ADDED", "web", "Pending"],
        ["DELETED", "a-much-longer-name", "Pending"],
    ]
    assert out[0].index("NAME") == out[1].index("web") == out[2].index("a-much-longer-name")


async def test_watch_printer_json_and_name(capsys: pytest.CaptureFixture[str]) -> None:
    project = builders.project("web")
    await WatchPrinter(None, GetOptions(meta.KINDS["projects"], [], "name", watch_events=True)).print(  # type: ignore[arg-type]  # project rows look nothing up
        [Change(v1.MODIFIED, project)]
    )
    await WatchPrinter(None, GetOptions(meta.KINDS["projects"], [], "json")).print(  # type: ignore[arg-type]  # project rows look nothing up
        [Change(v1.MODIFIED, project)]
    )
    out = capsys.readouterr().out
    name_line, json_text = out.split("\n", 1)
    assert name_line == "MODIFIED project/web"
    assert json.loads(json_text)["metadata"]["name"] == "web"


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def conforms(data: object, schema: dict[str, object], defs: dict[str, dict[str, object]], path: str = "") -> list[str]:
    """Where `data` breaks the structure of `schema` (property names, types, required); enums are not checked."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = defs[ref.rsplit("/", 1)[1]]
    allowed = schema.get("type")
    types = allowed if isinstance(allowed, list) else [allowed] if allowed else []
    if types and _JSON_TYPES[type(data)] not in types:
        return [f"{path}: {type(data).__name__} is not {types}"]
    problems: list[str] = []
    if isinstance(data, dict):
        props = schema.get("properties")
        problems += [f"{path}.{key}: required" for key in schema.get("required", []) if key not in data]  # type: ignore[attr-defined]  # schema is a JSON Schema object, typed object
        for key, value in data.items():
            if isinstance(props, dict) and key not in props:
                problems.append(f"{path}.{key}: not in the schema")
                continue
            sub = props[key] if isinstance(props, dict) else schema["additionalProperties"]
            problems += conforms(value, sub, defs, f"{path}.{key}")  # type: ignore[arg-type]  # sub is a JSON Schema object, typed object
    elif isinstance(data, list):
        for i, item in enumerate(data):
            problems += conforms(item, schema["items"], defs, f"{path}[{i}]")  # type: ignore[arg-type]  # items is a JSON Schema object, typed object
    return problems


@pytest.mark.parametrize(("resource", "cls"), [("projects", v1.Project), ("nodes", v1.Node)])
def test_everything_get_prints_fits_the_schema(resource: str, cls: type[Message]) -> None:
    schema = kind_schema(resource)
    data = object_dict(filled(cls))
    assert conforms(data, schema, schema["$defs"]) == []


def test_describe_node_says_the_ingress_goes_with_the_agent() -> None:
    node = builders.node("n1")
    node.status.network.ingress_port = 8081
    described = describe_node(node, None, [], [], NOW)
    assert "Ingress:" in described and "port 8081 (served by the agent: down while the agent is down)" in described
