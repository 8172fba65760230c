"""Compose's scalar forms to ours: sizes (`64m`, `1g`, bytes), durations (`1m30s`), booleans and integers that
interpolation left as strings (`"true"`, `"3"`).

Every function raises `ValueError` with a message that reads after the key's path ("is not a size: …").
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from caravanserai.text.durations import parse_duration

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)", re.IGNORECASE)
_BINARY = {"": "", "k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti", "p": "Pi"}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": Decimal("1e-9"), "us": Decimal("1e-6"), "µs": Decimal("1e-6"), "ms": Decimal("0.001")}
_SECONDS |= {"s": Decimal(1), "m": Decimal(60), "h": Decimal(3600)}
_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n", ""}


def size(value: object) -> str:
    """A memory quantity for a Compose size: bytes as a number, or `64m`/`64M`/`64mb`/`1.5g` (Docker's units are
    binary: `m` is MiB) → "64Mi"."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"is not a size: {value!r}")
    text = str(value).strip()
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"is not a size: {text!r} (e.g. 64m, 1g or a number of bytes)")
    number, unit = match.group(1), match.group(2).lower()
    if "." in number:
        scale = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}[unit]
        return str(int(Decimal(number) * (1024**scale)))
    return number + _BINARY[unit]


def duration(value: object) -> str:
    """Our duration text for a Compose duration (Go's form: `1m30s`, `500ms`, `2h`; a number is seconds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"is not a duration: {value!r}")
    text = str(value).strip()
    try:
        seconds = Decimal(text)
    except InvalidOperation:
        seconds, pos = Decimal(0), 0
        for match in _DURATION_PART.finditer(text):
            if match.start() != pos:
                break
            seconds += Decimal(match.group(1)) * _SECONDS[match.group(2)]
            pos = match.end()
        if pos != len(text) or not text:
            raise ValueError(f"is not a duration: {text!r} (e.g. 10s, 1m30s, 500ms)") from None
    if seconds < 0:
        raise ValueError(f"is not a duration: {text!r} (negative)")
    result = f"{int(seconds * 1000)}ms" if seconds != seconds.to_integral_value() else f"{int(seconds)}s"
    parse_duration(result)  # ours reads what we write
    return result


def boolean(value: object) -> bool:
    """A Compose boolean: true/false, or a string interpolation left (`"true"`, `"1"`, `"no"`)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"is not a boolean: {value!r}")


def integer(value: object) -> int:
    """A Compose integer: a number, or a string of digits."""
    if isinstance(value, bool):
        raise ValueError(f"is not an integer: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
        return int(value.strip())
    raise ValueError(f"is not an integer: {value!r}")


def text(value: object) -> str:
    """A scalar as Compose writes it in a string context: true → "true", 1.5 → "1.5", None → ""."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


__all__ = ["boolean", "duration", "integer", "size", "text"]
