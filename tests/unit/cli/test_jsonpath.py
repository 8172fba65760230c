"""`-o jsonpath=TEMPLATE`: kubectl's JSONPath templates over manifest data."""

from __future__ import annotations

from typing import Any

import pytest

from caravanserai.cli.jsonpath import JsonPathError, render

DATA: dict[str, Any] = {
    "kind": "ProjectList",
    "items": [
        {"metadata": {"name": "db"}, "status": {"phase": "Running", "ready": True}},
        {"metadata": {"name": "web"}, "status": {"phase": "Pending"}},
    ],
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.kind}", "ProjectList"),
        ("{.items[*].metadata.name}", "db web"),
        ("{.items[1].metadata.name}", "web"),
        ('{range .items[*]}{.metadata.name}:{.status.phase}{"\\n"}{end}', "db:Running\nweb:Pending\n"),
        ("{range .items[*]}{.metadata.name}{'\\t'}{end}", "db\tweb\t"),
        ('{.items[?(@.status.phase=="Pending")].metadata.name}', "web"),
        ("{.items[0].status.ready}", "true"),
        ("{.items[0].metadata}", '{"name": "db"}'),
        ("name={.items[0].metadata.name} missing={.nope}", "name=db missing="),
        ("{..name}", "db web"),
    ],
)
def test_templates(template: str, expected: str) -> None:
    assert render(template, DATA) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{range .items[*]}", "{range} without {end}"),
        ("{end}", "has no {range}"),
        ("{.a}}", "unmatched brace"),
        ("{}", "empty expression"),
    ],
)
def test_bad_templates_say_what_is_wrong(template: str, message: str) -> None:
    with pytest.raises(JsonPathError, match=message.replace("{", "\\{").replace("}", "\\}")):
        render(template, DATA)
