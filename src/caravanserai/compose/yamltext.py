"""A Compose file's YAML to plain data: dicts with string keys, lists, strings, numbers, booleans and None.

Guarantees:

* **YAML as Compose reads it.** YAML 1.2 core schema (`no` and `off` are strings, as in Compose), anchors and
  aliases, and merge keys (`<<: *defaults`, `<<: [*a, *b]`; keys written in the mapping win over merged ones).
  Timestamps stay the text written; mapping keys become strings.
* **Capped.** A document nested deeper than `MAX_DEPTH`, or expanding (through aliases, each use counted) to more
  than `MAX_VALUES` values, is refused, so an alias bomb costs at most `MAX_VALUES` steps.
* **One document.** A Compose file is one YAML document; a second one is refused.
* Every problem is a `ComposeError` naming the line where YAML names one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from caravanserai.compose.problems import ComposeError

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists accepted."""

MAX_VALUES = 200_000
"""Most values (counting each use of an alias) a Compose file may expand to."""


class _Constructor(SafeConstructor):
    """The safe constructor, with timestamps kept as the text written (Compose's schema wants strings)."""


def _timestamp_text(constructor: SafeConstructor, node: Any) -> str:
    return str(node.value)


_Constructor.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_text)


def _parse(text: str, source: str) -> object:
    yaml = YAML(typ="safe", pure=True)
    yaml.Constructor = _Constructor
    yaml.max_depth = MAX_DEPTH
    try:
        documents = list(yaml.load_all(text))
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        mark = getattr(exc, "problem_mark", None) if isinstance(exc, MarkedYAMLError) else None
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ComposeError(source, "", f"{where}invalid YAML: {problem}") from None
    except Exception as exc:  # noqa: BLE001 - the constructors raise plain Python errors on hostile input
        raise ComposeError(source, "", f"invalid YAML: cannot construct a value: {str(exc)[:200]}") from None
    documents = [d for d in documents if d is not None]
    if len(documents) > 1:
        raise ComposeError(source, "", "holds several YAML documents: a Compose file is one document")
    return documents[0] if documents else None


def _plain(value: object, budget: list[int], depth: int, source: str) -> Any:
    """A copy of `value` with string keys, spending one unit of `budget` per value (aliases are copied, so every
    use counts)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ComposeError(source, "", f"too large: more than {MAX_VALUES} values (an alias counts each use)")
    if depth > MAX_DEPTH:
        raise ComposeError(source, "", f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        return {_key(k): _plain(v, budget, depth + 1, source) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, budget, depth + 1, source) for v in value]
    return value


def _key(key: object) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


def load_yaml(text: str, *, source: str) -> Any:
    """The plain data of the Compose file `text` (None for an empty one); `source` names it in errors."""
    return _plain(_parse(text, source), [MAX_VALUES], 0, source)


__all__ = ["MAX_DEPTH", "MAX_VALUES", "load_yaml"]
