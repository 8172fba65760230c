"""`-o jsonpath=TEMPLATE`: kubectl's JSONPath templates over the manifest form of objects.

A template is text with expressions in braces, as kubectl takes it:

* `{.metadata.name}`, `{.spec.containers[0].image}`, `{.items[*].metadata.name}` (several results are joined with a
  space), filters such as `{.items[?(@.status.phase=="Running")].metadata.name}`, `{..name}`;
* `{range .items[*]}…{end}` repeats its body for each result, inside which expressions start from that result;
* `{"\\n"}` and `{'\\t'}` are literal text (escapes as in JSON strings); text outside braces is kept.

The root is the object (one named object) or the list (`{.items[*]…}`), as with `-o json`. A path that matches
nothing prints nothing (kubectl's `--allow-missing-template-keys`, its default). Expressions are evaluated by
jsonpath-ng (`$` prefixed); a template that does not parse raises `JsonPathError` with the position at fault.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
from jsonpath_ng.ext.parser import parse

_BRACES = re.compile(r"\{((?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^{}])*)\}")


class JsonPathError(ValueError):
    """A template that does not parse (the message names the part at fault)."""


@dataclass
class _Node:
    """Literal text, an expression, or a range with its body."""

    text: str = ""
    expr: Any = None
    body: list[_Node] = field(default_factory=list)
    is_range: bool = False


def render(template: str, data: Any) -> str:
    """The text of `template` over `data` (the manifest dict of an object or a list)."""
    return "".join(_run(_parse(template), data))


def _parse(template: str) -> list[_Node]:
    stack: list[list[_Node]] = [[]]
    position = 0
    for match in _BRACES.finditer(template):
        _literal(stack[-1], template[position : match.start()])
        position = match.end()
        inner = match.group(1).strip()
        if inner == "end":
            if len(stack) == 1:
                raise JsonPathError(f"{{end}} at character {match.start()} has no {{range}}")
            stack.pop()
        elif inner.startswith("range ") or inner == "range":
            node = _Node(expr=_compile(inner.removeprefix("range").strip(), match.start()), is_range=True)
            stack[-1].append(node)
            stack.append(node.body)
        elif inner.startswith(('"', "'")):
            stack[-1].append(_Node(text=_unquote(inner, match.start())))
        else:
            stack[-1].append(_Node(expr=_compile(inner, match.start())))
    _literal(stack[-1], template[position:])
    if len(stack) != 1:
        raise JsonPathError("{range} without {end}")
    return stack[0]


def _literal(nodes: list[_Node], text: str) -> None:
    if "{" in text or "}" in text:
        raise JsonPathError(f"unmatched brace in {text!r}")
    if text:
        nodes.append(_Node(text=text))


def _unquote(inner: str, at: int) -> str:
    body = inner[1:-1] if len(inner) >= 2 and inner[-1] == inner[0] else None
    if body is None:
        raise JsonPathError(f"unterminated string at character {at}")
    if inner[0] == "'":
        body = re.sub(r'(?<!\\)"', r"\"", body.replace("\\'", "'"))
    try:
        return str(json.loads('"' + body + '"', strict=False))
    except json.JSONDecodeError:
        raise JsonPathError(f"bad escape in {inner} at character {at}") from None


def _compile(expr: str, at: int) -> Any:
    if not expr:
        raise JsonPathError(f"empty expression at character {at}")
    path = expr.lstrip("$@")
    text = "$" if path in ("", ".") else "$" + (path if path.startswith((".", "[")) else "." + path)
    try:
        return parse(text)
    except (JsonPathLexerError, JsonPathParserError, Exception) as exc:  # jsonpath-ng raises bare Exceptions too
        raise JsonPathError(f"{expr!r} at character {at}: {exc}") from None


def _run(nodes: list[_Node], data: Any) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if node.expr is None:
            out.append(node.text)
        elif node.is_range:
            for match in node.expr.find(data):
                out.extend(_run(node.body, match.value))
        else:
            out.append(" ".join(_text(m.value) for m in node.expr.find(data)))
    return out


def _text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


__all__ = ["JsonPathError", "render"]
