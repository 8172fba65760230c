"""Schema evolution of custom kinds: which changes of a definition's schema break stored objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from caravanserai import v1
from caravanserai.apiserver.schemaevolution import breaking_changes, holds_field, retired_fields
from caravanserai.customkinds import schemas
from caravanserai.customkinds.evolution import incompatibilities
from caravanserai.customkinds.schemas import Schema, SchemaError
from support.customkinds import webfarm_messages

Field = descriptor_pb2.FieldDescriptorProto


def _definition() -> v1.ResourceDefinition:
    m = webfarm_messages()
    return schemas.definition_for(m.WebFarm, spec=m.WebFarmSpec, status=m.WebFarmStatus, group="example.com")


def _edited(edit: Callable[[descriptor_pb2.FileDescriptorProto], None]) -> Schema:
    definition = _definition()
    files = descriptor_pb2.FileDescriptorSet.FromString(definition.spec.schema)
    edit(next(f for f in files.file if f.name == "webfarm.proto"))
    definition.spec.schema = files.SerializeToString()
    return Schema.compile(definition.spec)


def _message(file: descriptor_pb2.FileDescriptorProto, name: str) -> Any:
    return next(m for m in file.message_type if m.name == name)


def _add_field(file: descriptor_pb2.FileDescriptorProto) -> None:
    _message(file, "WebFarmSpec").field.add(name="paused", number=9, type=Field.TYPE_BOOL, json_name="paused")


def _add_enum_value(file: descriptor_pb2.FileDescriptorProto) -> None:
    file.enum_type[0].value.add(name="RECREATE", number=2)


def _drop_enum_value(file: descriptor_pb2.FileDescriptorProto) -> None:
    del file.enum_type[0].value[1]


def _retype_nested(file: descriptor_pb2.FileDescriptorProto) -> None:
    status = _message(file, "WebFarmStatus")
    status.field[1].type = Field.TYPE_INT64  # ready_replicas int32 → int64


def _repeat(file: descriptor_pb2.FileDescriptorProto) -> None:
    _message(file, "WebFarmSpec").field[0].label = Field.LABEL_REPEATED


def _rename(file: descriptor_pb2.FileDescriptorProto, old: str, new: str) -> None:
    """Rename message `old` to `new`, with every reference to it (and to its nested map entries)."""
    _message(file, old).name = new
    for message in file.message_type:
        for field in (f for f in message.field if f.type_name):
            field.type_name = field.type_name.replace(f".example.webfarm.{old}", f".example.webfarm.{new}")


def _rename_template(file: descriptor_pb2.FileDescriptorProto) -> None:
    _rename(file, "ProjectTemplate", "Template")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_add_field, []),
        (_add_enum_value, []),
        (_drop_enum_value, [("spec.updatePolicy", "enum value ON_DELETE (1) was removed")]),
        (_retype_nested, [("status.readyReplicas", "field number 2 changes type from int32 to int64")]),
        (_repeat, [("spec.replicas", "field number 1 changes type from int32 to repeated int32")]),
        (
            _rename_template,
            [
                (
                    "spec.template",
                    "field number 3 changes type from example.webfarm.ProjectTemplate to example.webfarm.Template",
                )
            ],
        ),
    ],
)
def test_breaking_changes(
    edit: Callable[[descriptor_pb2.FileDescriptorProto], None], expected: list[tuple[str, str]]
) -> None:
    old = Schema.compile(_definition().spec)
    found = breaking_changes(old, _edited(edit))
    assert [(v.field, v.description) for v in found] == expected


def test_a_removed_spec_message_is_named() -> None:
    old = Schema.compile(_definition().spec)
    definition = _definition()
    files = descriptor_pb2.FileDescriptorSet.FromString(definition.spec.schema)
    file = next(f for f in files.file if f.name == "webfarm.proto")
    _rename(file, "WebFarmSpec", "SetSpec")
    definition.spec.schema = files.SerializeToString()
    definition.spec.spec_message = "example.webfarm.SetSpec"
    found = breaking_changes(old, Schema.compile(definition.spec))
    assert [(v.field, v.description) for v in found] == [
        ("spec.schema", "message example.webfarm.WebFarmSpec (used by spec) was removed")
    ]


def test_schemas_that_do_not_build_name_the_field() -> None:
    definition = _definition()
    definition.spec.spec_message = "example.webfarm.Nope"
    with pytest.raises(SchemaError) as info:
        Schema.compile(definition.spec)
    assert (info.value.field, info.value.message) == (
        "spec.specMessage",
        "message example.webfarm.Nope is not in spec.schema",
    )
    definition = _definition()
    files = descriptor_pb2.FileDescriptorSet.FromString(definition.spec.schema)
    del files.file[:]  # nothing but the derived object message would remain
    definition.spec.schema = files.SerializeToString()
    with pytest.raises(SchemaError) as info:
        Schema.compile(definition.spec)
    assert info.value.field == "spec.specMessage"


def _retire_replicas(file: descriptor_pb2.FileDescriptorProto) -> None:
    spec = _message(file, "WebFarmSpec")
    del spec.field[0]  # replicas = 1
    spec.reserved_range.add(start=1, end=2)
    spec.reserved_name.append("replicas")


def test_a_field_removed_with_its_number_and_name_reserved_is_retired_not_broken() -> None:
    old = Schema.compile(_definition().spec)
    new = _edited(_retire_replicas)
    assert breaking_changes(old, new) == []
    retired = retired_fields(old, new)
    assert [(r.path, r.message, r.number, r.name) for r in retired] == [
        ("spec.replicas", "example.webfarm.WebFarmSpec", 1, "replicas")
    ]
    holding = old.object_cls()
    holding.spec.replicas = 3
    assert holds_field(holding, retired[0]) and not holds_field(old.object_cls(), retired[0])


def test_reserving_only_the_number_is_still_a_removal() -> None:
    def number_only(file: descriptor_pb2.FileDescriptorProto) -> None:
        _retire_replicas(file)
        del _message(file, "WebFarmSpec").reserved_name[:]

    found = breaking_changes(Schema.compile(_definition().spec), _edited(number_only))
    assert [v.field for v in found] == ["spec.replicas"]
    assert 'reserve its number and name (reserved 1; reserved "replicas";)' in found[0].description


def test_incompatibilities_of_a_class_with_the_served_schema() -> None:
    older = Schema.compile(_definition().spec)
    assert incompatibilities(older, _edited(_add_field)) == []  # the served schema has more: fine
    assert [v.field for v in incompatibilities(_edited(_add_field), older)] == ["spec.paused"]
    retired = incompatibilities(older, _edited(_retire_replicas))
    assert [(v.field, v.description) for v in retired] == [
        ("spec.replicas", "field number 1 is retired by the served definition")
    ]
