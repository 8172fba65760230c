"""A Compose file checked against the Compose specification's JSON schema (`schema/compose-spec.json`, published
by the compose-spec project and vendored unchanged with its notice), after interpolation, as Compose does.

Guarantees:

* **The specification decides what is a Compose key.** A key the schema does not know is refused with its path,
  `services.web.imagee: unknown key (did you mean "image"?)`; extension keys (`x-…`) are accepted where the
  specification accepts them.
* **First problem, by path.** The problems are sorted by path and the first is raised as a `ComposeError`, so the
  same file always gives the same line.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError, best_match

from caravanserai.compose.problems import ComposeError, join

SCHEMA_FILE = "compose-spec.json"


@cache
def _validator() -> Draft7Validator:
    text = resources.files("caravanserai.compose").joinpath("schema").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return Draft7Validator(schema)


def compose_schema() -> dict[str, Any]:
    """The vendored Compose specification schema (a copy)."""
    return json.loads(json.dumps(_validator().schema))  # type: ignore[no-any-return]  # json.loads is typed Any; the schema is an object


def _path(error: ValidationError) -> str:
    path = ""
    for key in error.absolute_path:
        path = join(path, key)
    return path


def _unknown_keys(error: ValidationError) -> list[tuple[str, str]]:
    """(path, problem) for each key an `additionalProperties: false` refused."""
    instance = error.instance if isinstance(error.instance, dict) else {}
    known = list(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
    patterns = list(error.schema.get("patternProperties", {})) if isinstance(error.schema, dict) else []
    found = []
    for key in instance:
        if key in known or any(_matches(p, key) for p in patterns):
            continue
        guess = difflib.get_close_matches(key, known, n=1)
        hint = f' (did you mean "{guess[0]}"?)' if guess else ""
        if not known and patterns:
            hint = f" (a name must match {patterns[0]})"
        found.append((join(_path(error), key), f"unknown key{hint}"))
    return found


def _matches(pattern: str, key: str) -> bool:
    return re.search(pattern, key) is not None


def _problems(error: ValidationError) -> list[tuple[str, str]]:
    if error.validator == "additionalProperties":
        return _unknown_keys(error) or [(_path(error), error.message)]
    if error.validator in ("oneOf", "anyOf") and error.context:
        fitting = [e for e in error.context if e.validator not in ("type", "oneOf") or e.relative_path]
        if fitting:  # the branch of the value's own type: its problem, the deepest first
            return _problems(best_match(sorted(fitting, key=lambda e: -len(e.absolute_path))[:1]) or fitting[0])
        kinds = _expected(error.schema)
        return [(_path(error), f"must be {kinds}, not {_described(error.instance)}")]
    if error.validator == "type":
        return [(_path(error), f"must be {_expected(error.schema)}, not {_described(error.instance)}")]
    return [(_path(error), error.message)]


def _expected(schema: object) -> str:
    """`a string or a list` for a schema's type or the types of its oneOf branches."""
    names = {"object": "a mapping", "array": "a list", "string": "a string", "number": "a number"}
    names |= {"integer": "an integer", "boolean": "a boolean", "null": "null"}
    kinds: list[str] = []
    branches = schema.get("oneOf", [schema]) if isinstance(schema, dict) else []
    for branch in branches:
        found = branch.get("type") if isinstance(branch, dict) else None
        if found is None and isinstance(branch, dict) and "$ref" in branch:
            found = "array" if "list" in branch["$ref"] else None
        for kind in found if isinstance(found, list) else [found]:
            name = names.get(str(kind), str(kind))
            if kind is not None and name not in kinds:
                kinds.append(name)
    return " or ".join(kinds) or "something else"


def _described(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return repr(value) if isinstance(value, str) else f"{value}"


def validate(data: object, *, source: str) -> None:
    """Raises `ComposeError` for the first problem (by path) the specification's schema finds in `data`."""
    problems: list[tuple[str, str]] = []
    for error in _validator().iter_errors(data):
        problems.extend(_problems(error))
    if problems:
        path, problem = min(problems)
        raise ComposeError(source, path, problem)


__all__ = ["SCHEMA_FILE", "compose_schema", "validate"]
