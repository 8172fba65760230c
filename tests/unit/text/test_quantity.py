"""Quantity parsing and formatting: tables of inputs and exact expected values, plus round-trip properties."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caravanserai.text.quantity import (
    MAX_EXPONENT,
    cpu_millis,
    format_bytes,
    format_cpu,
    format_quantity,
    parse_quantity,
    to_int,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", "0"),
        ("1", "1"),
        ("1.5", "1.5"),
        (".5", "0.5"),
        ("5.", "5"),
        ("+2", "2"),
        ("-2", "-2"),
        ("500m", "0.5"),
        ("1m", "0.001"),
        ("1k", "1000"),
        ("2M", "2000000"),
        ("2G", "2000000000"),
        ("1T", "1e12"),
        ("1P", "1e15"),
        ("1E", "1e18"),
        ("1Ki", "1024"),
        ("512Mi", "536870912"),
        ("1.5Gi", "1610612736"),
        ("1Ti", str(2**40)),
        ("1Pi", str(2**50)),
        ("1Ei", str(2**60)),
        ("0.1Ki", "102.4"),
        ("1e3", "1000"),
        ("1E3", "1000"),
        ("1e-3", "0.001"),
        ("1.5e+2", "150"),
        ("12345678901234567890123456789012345", "12345678901234567890123456789012345"),
        ("0.000000000000000000000000000001", "1e-30"),
    ],
)
def test_parse_quantity_is_exact(text: str, expected: str) -> None:
    assert parse_quantity(text) == Decimal(expected)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        "1 Gi",
        "abc",
        "1.2.3",
        "1e",
        "1Kb",
        "1ki",
        "1mi",
        "1u",
        "--1",
        "1e1.5",
        "1e9999",
        "١",
        "Ki",
        "1\n",
        "1" * 65,
        f"1e{MAX_EXPONENT + 1}",
        f"1e-{MAX_EXPONENT + 1}",
        ".",
    ],
)
def test_parse_quantity_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


def test_parse_error_says_what_is_expected() -> None:
    with pytest.raises(ValueError) as info:
        parse_quantity("2 cores")
    assert str(info.value).startswith("invalid quantity '2 cores': expected a number with an optional suffix")
    assert '"512Mi"' in str(info.value)


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("1", 1000),
        ("0.5", 500),
        ("500m", 500),
        ("100m", 100),
        ("0.0001", 1),
        ("1.0001", 1001),
        ("2k", 2_000_000),
        ("0", 0),
        ("1e-3", 1),
        ("1Ki", 1_024_000),
    ],
)
def test_cpu_millis_rounds_up(text: str, millis: int) -> None:
    assert cpu_millis(text) == millis


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512Mi", 536_870_912),
        ("1.5", 2),
        ("1", 1),
        ("0.1", 1),
        ("0", 0),
        ("1G", 10**9),
        ("1500m", 2),
        ("3", 3),
        ("1e18", 10**18),
    ],
)
def test_to_int_rounds_up(text: str, value: int) -> None:
    assert to_int(text) == value


@pytest.mark.parametrize("function", [cpu_millis, to_int])
@pytest.mark.parametrize("text", ["-1", "-500m", "-1Gi"])
def test_resource_amounts_refuse_negative_values(function: Callable[[str], int], text: str) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        function(text)


@pytest.mark.parametrize(
    ("millis", "text"), [(0, "0"), (500, "500m"), (1000, "1"), (2000, "2"), (1500, "1500m"), (1, "1m"), (-500, "-500m")]
)
def test_format_cpu(millis: int, text: str) -> None:
    assert format_cpu(millis) == text
    assert parse_quantity(text) * 1000 == millis


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0"),
        (1023, "1023"),
        (1024, "1Ki"),
        (1536, "1.5Ki"),
        (512 * 2**20, "512Mi"),
        (3 * 2**29, "1.5Gi"),
        (2**30 - 1, "1Gi"),
        (2**40, "1Ti"),
        (2**60, "1Ei"),
        (5 * 2**60, "5Ei"),
        (1_000_000, "976.6Ki"),
        (-2048, "-2Ki"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text
    parse_quantity(text)  # always a valid quantity


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        (0, False, "0"),
        (2000, False, "2k"),
        (1500, False, "1500"),
        (10**9, False, "1G"),
        (Decimal("1.5"), False, "1500m"),
        (Decimal("0.0005"), False, "0.0005"),
        (2**20, True, "1Mi"),
        (3 * 2**30, True, "3Gi"),
        (2000, True, "2k"),
        (1536, True, "1536"),
        ("1536Mi", True, "1536Mi"),
        ("1.5Gi", True, "1536Mi"),
        ("100m", False, "100m"),
        ("1e3", False, "1k"),
        (-1000, False, "-1k"),
        (Decimal("-0"), False, "0"),
    ],
)
def test_format_quantity(value: Decimal | int | str, binary: bool, text: str) -> None:
    assert format_quantity(value, binary=binary) == text


def test_format_quantity_refuses_non_finite_values() -> None:
    with pytest.raises(ValueError, match="must be finite"):
        format_quantity(Decimal("Infinity"))


@given(
    st.decimals(allow_nan=False, allow_infinity=False, places=6, min_value=-(10**20), max_value=10**20),
    st.booleans(),
)
def test_format_quantity_round_trips(value: Decimal, binary: bool) -> None:
    assert parse_quantity(format_quantity(value, binary=binary)) == value


@given(st.integers(min_value=0, max_value=10**15))
def test_format_cpu_round_trips(millis: int) -> None:
    assert cpu_millis(format_cpu(millis)) == millis


@given(st.integers(min_value=0, max_value=2**70))
def test_format_bytes_is_close(n: int) -> None:
    shown = parse_quantity(format_bytes(n))
    assert abs(shown - n) <= Decimal(n) / 20
