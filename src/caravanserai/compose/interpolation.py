"""Compose's variable substitution in a string, as the Compose specification defines it.

    substitute("${TAG:-latest}", lookup)        # "latest" when TAG is unset or empty

Forms (a default or message may itself hold substitutions, as in Compose):

* `$VAR`, `${VAR}`: the value; unset → "" and a note (Compose: "variable is not set. Defaulting to a blank string").
* `${VAR:-default}`: `default` when VAR is unset or empty; `${VAR-default}`: only when unset.
* `${VAR:?message}`: an error saying `message` when VAR is unset or empty; `${VAR?message}`: only when unset.
* `${VAR:+replacement}`: `replacement` when VAR is set and not empty, else ""; `${VAR+replacement}`: when set.
* `$$` is a literal `$`; a `$` followed by anything else is kept as it is.

An unclosed `${`, or a name that is not `[A-Za-z_][A-Za-z0-9_]*`, raises `InterpolationError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Lookup = Callable[[str], str | None]
"""A variable's value, or None when it is not set."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = (":-", ":?", ":+", "-", "?", "+")


class InterpolationError(ValueError):
    """A substitution that cannot be made; the message says why."""


def substitute(text: str, lookup: Lookup, unset: list[str] | None = None) -> str:
    """`text` with every substitution made. Names of unset variables used without a default are appended to
    `unset` (once each)."""
    out: list[str] = []
    pos = 0
    while True:
        dollar = text.find("$", pos)
        if dollar < 0:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos:dollar])
        pos = _one(text, dollar, lookup, unset, out)


def _one(text: str, dollar: int, lookup: Lookup, unset: list[str] | None, out: list[str]) -> int:
    """Appends the substitution starting at `text[dollar]` to `out`; returns where the text goes on."""
    after = text[dollar + 1 : dollar + 2]
    if after == "$":
        out.append("$")
        return dollar + 2
    if after == "{":
        end = _closing(text, dollar + 2)
        out.append(_braced(text[dollar + 2 : end], lookup, unset))
        return end + 1
    match = _NAME.match(text, dollar + 1)
    if match is None:
        out.append("$")
        return dollar + 1
    out.append(_value(match.group(0), lookup, unset))
    return match.end()


def _closing(text: str, start: int) -> int:
    """The index of the `}` closing a `${` whose body starts at `start` (nested `${…}` skipped)."""
    depth, pos = 1, start
    while pos < len(text):
        if text.startswith("$$", pos):
            pos += 2
            continue
        if text.startswith("${", pos):
            depth, pos = depth + 1, pos + 2
            continue
        if text[pos] == "}":
            depth -= 1
            if depth == 0:
                return pos
        pos += 1
    raise InterpolationError(f"invalid interpolation format: unclosed ${{ in {_shown(text)}")


def _braced(body: str, lookup: Lookup, unset: list[str] | None) -> str:
    match = _NAME.match(body)
    if match is None:
        raise InterpolationError(f"invalid interpolation format: ${{{body}}}: a variable name is required")
    name, rest = match.group(0), body[match.end() :]
    if not rest:
        return _value(name, lookup, unset)
    operator = next((op for op in _OPERATORS if rest.startswith(op)), None)
    if operator is None:
        raise InterpolationError(f"invalid interpolation format: ${{{body}}}: unknown operator after {name}")
    word = rest[len(operator) :]
    value = lookup(name)
    present = value is not None and (value != "" or not operator.startswith(":"))
    if operator.endswith("-"):
        return value if present and value is not None else substitute(word, lookup, unset)
    if operator.endswith("+"):
        return substitute(word, lookup, unset) if present else ""
    if not present or value is None:
        message = substitute(word, lookup, unset) or ("is empty" if value == "" else "is not set")
        raise InterpolationError(f"required variable {name}: {message}")
    return value


def _value(name: str, lookup: Lookup, unset: list[str] | None) -> str:
    value = lookup(name)
    if value is None:
        if unset is not None and name not in unset:
            unset.append(name)
        return ""
    return value


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "…")


__all__ = ["InterpolationError", "Lookup", "substitute"]
