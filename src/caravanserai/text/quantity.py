"""Kubernetes-style quantities ("500m", "1.5", "512Mi", "2G", "1e3"), parsed and formatted exactly.

Grammar (as in Kubernetes' `resource.Quantity`):

    quantity ::= [+-] number [suffix]
    number   ::= digits | digits "." [digits] | "." digits
    suffix   ::= "m" | "k" | "M" | "G" | "T" | "P" | "E"          decimal SI (milli … exa)
               | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"          binary (2**10 … 2**60)
               | ("e" | "E") [+-] digits                          decimal exponent

Guarantees:

* **Exact.** Values are `decimal.Decimal` computed without rounding: `parse_quantity("0.1Ki") == Decimal("102.4")`.
* **Capped.** Input longer than `MAX_LENGTH` characters or with an exponent beyond ±`MAX_EXPONENT` is refused,
  so hostile input cannot make arithmetic slow or huge.
* **Signs.** `parse_quantity` accepts a sign (it is part of the syntax); `cpu_millis` and `to_int`, which read
  resource amounts, refuse negative values.
* **Round trip.** `parse_quantity(format_quantity(v)) == v` for every value; `format_cpu` is exact as well;
  `format_bytes` is for people and rounds to one decimal place.
* Every refusal is a `ValueError` whose message quotes the input and says what is expected.
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal

MAX_LENGTH = 64
"""Longest accepted quantity text, in characters."""

MAX_EXPONENT = 64
"""Largest accepted magnitude of an `e`/`E` exponent."""

_DECIMAL_SUFFIXES = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_UNITS = tuple((name, 2**power) for name, power in sorted(_BINARY_SUFFIXES.items(), key=lambda i: -i[1]))
_DECIMAL_UNITS = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)|[eE](?P<exponent>[+-]?[0-9]+))?",
    re.ASCII,
)

# Wide enough for MAX_LENGTH digits times 2**60; Inexact is trapped so a rounding can never pass silently.
_EXACT = decimal.Context(prec=200, Emax=10_000, Emin=-10_000, traps=[decimal.Inexact, decimal.Overflow])

_EXPECTED = (
    "expected a number with an optional suffix (m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) "
    'or exponent, e.g. "500m", "1.5", "512Mi", "2G" or "1e3"'
)


def parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity: `parse_quantity("500m") == Decimal("0.5")`.

    Raises `ValueError` naming the input when it is not a quantity (whitespace included).
    """
    if not isinstance(text, str):
        raise ValueError(f"invalid quantity {text!r}: must be a string")
    if len(text) > MAX_LENGTH:
        raise ValueError(f"invalid quantity {text[:20]!r}...: longer than {MAX_LENGTH} characters")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid quantity {text!r}: {_EXPECTED}")
    number = Decimal(match["sign"] + match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > MAX_EXPONENT:
            raise ValueError(f"invalid quantity {text!r}: exponent must be between -{MAX_EXPONENT} and {MAX_EXPONENT}")
        return number.scaleb(exponent, _EXACT)
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIXES:
        return _EXACT.multiply(number, Decimal(2 ** _BINARY_SUFFIXES[suffix]))
    return number.scaleb(_DECIMAL_SUFFIXES[suffix], _EXACT)


def _non_negative(text: str) -> Decimal:
    value = parse_quantity(text)
    if value < 0:
        raise ValueError(f"invalid quantity {text!r}: must not be negative")
    return value


def cpu_millis(text: str) -> int:
    """CPU in whole millicores, rounded up: "0.5" → 500, "2" → 2000, "0.0001" → 1. Refuses negative values."""
    return math.ceil(_EXACT.multiply(_non_negative(text), Decimal(1000)))


def to_int(text: str) -> int:
    """A count or a number of bytes, rounded up: "512Mi" → 536870912, "1.5" → 2. Refuses negative values."""
    return math.ceil(_non_negative(text))


def format_cpu(millis: int) -> str:
    """Millicores as a quantity: 2000 → "2", 500 → "500m", 0 → "0". Exact: `cpu_millis(format_cpu(n)) == n`."""
    if millis % 1000 == 0:
        return str(millis // 1000)
    return f"{millis}m"


def format_bytes(n: int) -> str:
    """Bytes for people, in the largest binary unit not above `n`: "512Mi", "1.5Gi", "1023" (below 1Ki).

    The number is rounded half-up to at most one decimal place (so the result may differ from `n` by up to 5 %
    of a unit); it is always a valid quantity. Use `format_quantity(n, binary=True)` for an exact text.
    """
    sign, magnitude = ("-", -n) if n < 0 else ("", n)
    for index, (name, size) in enumerate(_BINARY_UNITS):
        if magnitude < size:
            continue
        rounded = (Decimal(magnitude) / Decimal(size)).quantize(Decimal("0.1"), decimal.ROUND_HALF_UP)
        if rounded >= 1024 and index > 0:  # 1023.96Mi rounds to 1024.0Mi: say 1Gi instead
            name, rounded = _BINARY_UNITS[index - 1][0], Decimal(1)
        return f"{sign}{_plain(rounded)}{name}"
    return f"{sign}{magnitude}"


def format_quantity(value: Decimal | int | str, *, binary: bool = False) -> str:
    """The canonical text of a quantity; exact: `parse_quantity(format_quantity(v)) == parse_quantity(str(v))`.

    Whole numbers use the largest suffix that divides them (binary suffixes first when `binary` is true):
    2000 → "2k", 1536 with `binary` → "1536" … 1048576 with `binary` → "1Mi". Fractions with at most three
    decimals use milli ("1.5" → "1500m"); finer fractions are written as plain decimals ("0.0005").
    A string argument is parsed first, so this also canonicalises user input.
    """
    number = parse_quantity(value) if isinstance(value, str) else Decimal(value)
    if not number.is_finite():
        raise ValueError(f"invalid quantity {value!r}: must be finite")
    if number == number.to_integral_value():
        whole = int(number)
        units = (_BINARY_UNITS + _DECIMAL_UNITS) if binary else _DECIMAL_UNITS
        for name, size in units:
            if whole != 0 and whole % size == 0:
                return f"{whole // size}{name}"
        return str(whole)
    millis = _EXACT.multiply(number, Decimal(1000))
    if millis == millis.to_integral_value():
        return f"{int(millis)}m"
    return _plain(number)


def _plain(number: Decimal) -> str:
    """A decimal without exponent and without trailing zeros: Decimal("1.50") → "1.5", Decimal("2.0") → "2"."""
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


__all__ = [
    "MAX_EXPONENT",
    "MAX_LENGTH",
    "cpu_millis",
    "format_bytes",
    "format_cpu",
    "format_quantity",
    "parse_quantity",
    "to_int",
]
