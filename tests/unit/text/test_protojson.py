"""protojson: the field types the v1 resources do not use (enums, doubles, unsigned and bytes fields)."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2

from caravanserai import v1
from caravanserai.errors import Invalid
from caravanserai.text.protojson import describe, from_data, to_data


def test_enums_doubles_unsigned_and_bytes_round_trip() -> None:
    field = from_data(
        {"name": "x", "number": "3", "type": "TYPE_STRING", "label": "LABEL_REPEATED"},
        descriptor_pb2.FieldDescriptorProto,
    )
    assert field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    assert from_data({"type": 9}, descriptor_pb2.FieldDescriptorProto) == field.__class__(type=field.type)
    assert to_data(field) == {"name": "x", "number": 3, "label": "LABEL_REPEATED", "type": "TYPE_STRING"}
    option = from_data(
        {"doubleValue": 2, "positiveIntValue": str(2**64 - 1), "stringValue": "aGk="},
        descriptor_pb2.UninterpretedOption,
    )
    assert (option.double_value, option.positive_int_value, option.string_value) == (2.0, 2**64 - 1, b"hi")
    assert to_data(option) == {"positiveIntValue": 2**64 - 1, "doubleValue": 2.0, "stringValue": "aGk="}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "STRING"}, "type: expected one of TYPE_DOUBLE, TYPE_FLOAT"),
        ({"type": 99}, "type: expected one of TYPE_DOUBLE"),
        ({"number": [1]}, "number: expected an integer, got a list"),
        (
            {"options": {"deprecated": "yes"}},
            'options.deprecated: expected a boolean (true or false), got a string "yes"',
        ),
    ],
)
def test_field_descriptor_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(Invalid) as info:
        from_data(data, descriptor_pb2.FieldDescriptorProto)
    assert message in str(info.value)
    assert str(info.value).startswith("invalid FieldDescriptorProto: ")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"positiveIntValue": -1}, "positiveIntValue: must be between 0 and 18446744073709551615, not -1"),
        ({"negativeIntValue": str(2**63)}, "negativeIntValue: must be between"),
        ({"doubleValue": "x"}, 'doubleValue: expected a number, got a string "x"'),
        ({"doubleValue": True}, "doubleValue: expected a number, got a boolean (true)"),
        ({"stringValue": 1}, "stringValue: expected a base64 string, got an integer (1)"),
    ],
)
def test_uninterpreted_option_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(Invalid, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_data(data, descriptor_pb2.UninterpretedOption)


def test_the_top_level_must_be_a_mapping() -> None:
    with pytest.raises(Invalid) as info:
        from_data(["x"], v1.Project)
    assert [(v.field, v.description) for v in info.value.violations] == [("", "expected a mapping, got a list")]


def test_max_values_bounds_the_work() -> None:
    data = {"metadata": {"finalizers": ["x"] * 20}}
    assert len(from_data(data, v1.Project, max_values=30).metadata.finalizers) == 20
    with pytest.raises(Invalid, match="too large: more than 10 values"):
        from_data(data, v1.Project, max_values=10)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("x", 'a string "x"'),
        ("é" * 70, 'a string "' + "é" * 64 + '…"'),
        (True, "a boolean (true)"),
        (3, "an integer (3)"),
        (1.5, "a number (1.5)"),
        ({}, "a mapping"),
        ([], "a list"),
        (None, "null"),
        ({1}, "a set"),
    ],
)
def test_describe(value: object, text: str) -> None:
    assert describe(value) == text
