"""Compose's `.env` and `env_file` format: `KEY=VALUE` lines.

    values = parse_dotenv(text, lookup=os.environ.get)

Rules (the Compose specification's):

* Blank lines and lines starting with `#` are skipped; `export KEY=VALUE` is `KEY=VALUE`; spaces around the key and
  an unquoted value are dropped.
* An unquoted value ends at ` #` (an inline comment); `VAR` alone (no `=`) takes the value from `lookup`, or is
  left out when it is unset.
* `'single quotes'` are literal; `"double quotes"` understand `\\n`, `\\r`, `\\t`, `\\\\`, `\\"` and may span lines.
* Unquoted and double-quoted values are interpolated (`${VAR:-x}`, see `caravanserai.compose.interpolation`)
  against `lookup`, then the file's earlier keys; single-quoted ones are not.

A line that is not of this form raises `DotenvError` with its line number.
"""

from __future__ import annotations

import re

from caravanserai.compose.interpolation import InterpolationError, Lookup, substitute

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "$": "$$"}


class DotenvError(ValueError):
    """A line that cannot be read; the message names its line."""


def parse_dotenv(text: str, *, lookup: Lookup) -> dict[str, str]:
    """The variables of `text`, in order of first appearance (a later line wins)."""
    values: dict[str, str] = {}

    def known(name: str) -> str | None:
        found = lookup(name)
        return found if found is not None else values.get(name)

    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].strip()
        index += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[len("export") :].strip()
        match = _KEY.match(line)
        if match is None:
            raise DotenvError(f"line {number}: expected KEY=VALUE, got {line[:40]!r}")
        key, rest = match.group(0), line[match.end() :].lstrip()
        if not rest:
            inherited = lookup(key)
            if inherited is not None:
                values[key] = inherited
            continue
        if not rest.startswith("="):
            raise DotenvError(f"line {number}: expected KEY=VALUE, got {line[:40]!r}")
        raw = rest[1:].lstrip()
        try:
            value, index = _value(raw, lines, index, number, known)
        except InterpolationError as exc:
            raise DotenvError(f"line {number}: {exc}") from None
        values[key] = value
    return values


def _value(raw: str, lines: list[str], index: int, number: int, known: Lookup) -> tuple[str, int]:
    """The value starting with `raw` (the rest of line `number`) and the index of the next line to read."""
    if raw.startswith("'"):
        end = raw.find("'", 1)
        if end < 0:
            raise DotenvError(f"line {number}: unclosed single quote")
        return raw[1:end], index
    if raw.startswith('"'):
        body, index = _double_quoted(raw[1:], lines, index, number)
        return substitute(body, known), index
    comment = re.search(r"\s#", raw)
    value = (raw[: comment.start()] if comment else raw).strip()
    return substitute(value, known), index


def _double_quoted(rest: str, lines: list[str], index: int, number: int) -> tuple[str, int]:
    out: list[str] = []
    text = rest
    while True:
        pos = 0
        while pos < len(text):
            char = text[pos]
            if char == "\\" and pos + 1 < len(text):
                out.append(_ESCAPES.get(text[pos + 1], "\\" + text[pos + 1]))
                pos += 2
                continue
            if char == '"':
                return "".join(out), index
            out.append(char)
            pos += 1
        if index >= len(lines):
            raise DotenvError(f"line {number}: unclosed double quote")
        out.append("\n")
        text, index = lines[index], index + 1


__all__ = ["DotenvError", "parse_dotenv"]
