"""Variables in Compose files: `${VAR}` and its forms, `$$`, `.env` beside the file (the environment wins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caravanserai.compose import ComposeError, convert_file, convert_text
from caravanserai.compose.dotenv import DotenvError, parse_dotenv
from caravanserai.compose.interpolation import InterpolationError, substitute

VARIABLES = {"TAG": "1.27", "EMPTY": ""}.get


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nginx:${TAG}", "nginx:1.27"),
        ("nginx:$TAG", "nginx:1.27"),
        ("${MISSING:-latest}", "latest"),
        ("${EMPTY:-latest}", "latest"),
        ("${EMPTY-latest}", ""),
        ("${MISSING-latest}", "latest"),
        ("${MISSING:-${TAG}}", "1.27"),
        ("${TAG:+set}", "set"),
        ("${EMPTY:+set}", ""),
        ("${EMPTY+set}", "set"),
        ("${MISSING+set}", ""),
        ("cost $$5 and $${TAG}", "cost $5 and ${TAG}"),
        ("a $ alone", "a $ alone"),
        ("$MISSING", ""),
    ],
)
def test_substitution_forms(text: str, expected: str) -> None:
    assert substitute(text, VARIABLES) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("${EMPTY:?needs a value}", "required variable EMPTY: needs a value"),
        ("${MISSING?}", "required variable MISSING: is not set"),
        ("${MISSING:?}", "required variable MISSING: is not set"),
        ("${TAG", "unclosed"),
        ("${1X}", "a variable name is required"),
        ("${TAG%x}", "unknown operator"),
    ],
)
def test_substitution_errors(text: str, message: str) -> None:
    with pytest.raises(InterpolationError, match=message.replace("?", r"\?")):
        substitute(text, VARIABLES)


def test_required_variable_set_but_empty_only_fails_with_colon() -> None:
    assert substitute("${EMPTY?x}", VARIABLES) == ""


def test_unset_variables_are_collected_once() -> None:
    unset: list[str] = []
    substitute("$A ${A} ${B:-x} $C", VARIABLES, unset)
    assert unset == ["A", "C"]


def test_dotenv_format() -> None:
    text = (
        "# a comment\n"
        "export PLAIN=value # an inline comment\n"
        "SPACED = spaced out \n"
        "SINGLE='${PLAIN} stays'\n"
        'DOUBLE="line\\nbreak ${PLAIN}"\n'
        'MULTI="first\n'
        'second"\n'
        "REF=${PLAIN}-${TAG}\n"
        "TAG\n"
        "UNSET_NAME\n"
        "EMPTY_VALUE=\n"
    )
    assert parse_dotenv(text, lookup=VARIABLES) == {
        "PLAIN": "value",
        "SPACED": "spaced out",
        "SINGLE": "${PLAIN} stays",
        "DOUBLE": "line\nbreak value",
        "MULTI": "first\nsecond",
        "REF": "value-1.27",
        "TAG": "1.27",
        "EMPTY_VALUE": "",
    }


@pytest.mark.parametrize("line", ["=x", "KEY value", "K='open", 'K="open'])
def test_dotenv_refuses_bad_lines_with_their_number(line: str) -> None:
    with pytest.raises(DotenvError, match="line 2"):
        parse_dotenv("OK=1\n" + line + "\n", lookup=VARIABLES)


COMPOSE = """\
services:
  web:
    image: ${IMAGE:-nginx}:${TAG:-latest}
    environment:
      GREETING: ${GREETING}
      PRICE: $$5
"""


def test_env_file_beside_the_compose_file_and_the_environment_wins(tmp_path: Path) -> None:
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    (tmp_path / ".env").write_text("IMAGE=httpd\nTAG=2.4\nGREETING=from-dotenv\n")
    project = convert_file(str(tmp_path / "compose.yaml"), environ={"TAG": "2.5"}).project
    service = project.spec.services[0]
    assert service.image == "httpd:2.5"
    assert {e.name: e.value for e in service.env} == {"GREETING": "from-dotenv", "PRICE": "$5"}


def test_unset_variable_is_blank_and_said(tmp_path: Path) -> None:
    conversion = convert_text(COMPOSE, source="compose.yaml", directory=str(tmp_path), environ={})
    assert conversion.project.spec.services[0].image == "nginx:latest"
    assert [str(n) for n in conversion.notes] == [
        'warning: compose.yaml: the variable "GREETING" is not set: it is read as a blank string (as Compose does)'
    ]


def test_required_variable_names_the_key(tmp_path: Path) -> None:
    text = "services:\n  web:\n    image: ${IMAGE:?set IMAGE to the image to run}\n"
    with pytest.raises(ComposeError) as caught:
        convert_text(text, source="compose.yaml", directory=str(tmp_path), environ={})
    assert str(caught.value) == (
        "compose.yaml: services.web.image: required variable IMAGE: set IMAGE to the image to run"
    )


def test_bad_dotenv_is_one_line(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("GOOD=1\nnot a line\n")
    with pytest.raises(ComposeError, match=r"compose.yaml: .env: line 2: expected KEY=VALUE"):
        convert_text(COMPOSE, source="compose.yaml", directory=str(tmp_path), environ={})


def test_variables_make_booleans_and_numbers(tmp_path: Path) -> None:
    text = "services:\n  web:\n    image: x\n    privileged: ${PRIV:-false}\n    init: ${INIT}\n"
    service = convert_text(text, source="c.yaml", directory=str(tmp_path), environ={"INIT": "true"}).project
    assert (service.spec.services[0].privileged, service.spec.services[0].init) == (False, True)
