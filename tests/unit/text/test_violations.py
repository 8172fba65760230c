"""The violation collector: messages, order and the cap."""

from __future__ import annotations

import pytest

from caravanserai.errors import FieldViolation, Invalid
from caravanserai.text.violations import MAX_VIOLATIONS, Violations, key_path, quote


def test_quote_and_key_path_cut_long_input() -> None:
    assert quote("web") == '"web"'
    assert quote('a"b') == '"a\\"b"'
    assert quote("ü" * 65) == '"' + "ü" * 64 + '…"'
    assert key_path("metadata.labels", "Bad Key") == 'metadata.labels["Bad Key"]'


def test_rules_record_specific_messages_in_order() -> None:
    found = Violations()
    found.check("a", None)
    found.check("b", "is odd", prefix="value ")
    assert found.required("c", "") is False
    assert found.required("d", "x") is True
    found.choice("e", "SCTP", ("TCP", "UDP"), empty="for TCP")
    found.choice("f", "", ("TCP", "UDP"), empty="for TCP")
    found.choice("g", "", ("Normal", "Warning"))
    found.between("h", 0, 1, 65535)
    found.non_negative("i", -1)
    found.unique([("j[0]", "x"), ("j[1]", ""), ("j[2]", "x"), ("j[3]", "y"), ("j[4]", "x")], "name")
    assert found.violations == [
        FieldViolation("b", "value is odd"),
        FieldViolation("c", "is required"),
        FieldViolation("e", 'must be one of "TCP", "UDP" (or empty for TCP), not "SCTP"'),
        FieldViolation("g", 'is required (one of "Normal", "Warning")'),
        FieldViolation("h", "must be between 1 and 65535, not 0"),
        FieldViolation("i", "must not be negative, not -1"),
        FieldViolation("j[2]", 'duplicate name "x" (first at j[0])'),
        FieldViolation("j[4]", 'duplicate name "x" (first at j[0])'),
    ]


def test_raise_if_any() -> None:
    Violations().raise_if_any(what="nothing")
    found = Violations()
    found.add("spec", "is wrong")
    with pytest.raises(Invalid, match=r"^invalid project \"a\": spec: is wrong$"):
        found.raise_if_any(what='project "a"')


def test_the_error_lists_at_most_max_violations() -> None:
    found = Violations()
    for i in range(MAX_VIOLATIONS + 7):
        found.add(f"x[{i}]", "bad")
    error = found.error(what="thing")
    assert len(error.violations) == MAX_VIOLATIONS + 1
    assert error.violations[-1] == FieldViolation("(more)", "7 further violations")
