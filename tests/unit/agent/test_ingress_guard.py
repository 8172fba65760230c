"""The ingress's rate-limited logging and flag parsing, without sockets (the connection layer itself is tested
over real sockets in tests/integration/test_ingress_hardening.py)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
from typing import Any

import pytest

from caravanserai.agent.ingress.guard import ConnectionGuard, RateLimitedLog, RepeatFilter
from caravanserai.agent.ingress.httpdetails import IngressLimits
from caravanserai.agent.ingress.server import add_ingress_arguments, limits_from_args, parse_networks
from caravanserai.testing.clock import FakeClock


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event, fields))


def test_repeated_lines_are_logged_once_per_interval_with_the_count_left_out() -> None:
    clock, out = FakeClock(), Recorder()
    log = RateLimitedLog(out, clock, interval=10)
    for _ in range(1000):
        log.warning("ingress connection refused", key="max-connections", client="192.0.2.1")
    log.warning("ingress connection refused", key="max-connections-per-client")  # another key: its own line
    assert len(out.lines) == 2
    clock.advance(10)
    log.warning("ingress connection refused", key="max-connections", client="192.0.2.1")
    assert out.lines[-1] == (
        "warning",
        "ingress connection refused",
        {"client": "192.0.2.1", "suppressed": 999},
    )


def test_the_standard_library_filter_counts_what_it_drops() -> None:
    clock = FakeClock()
    repeats = RepeatFilter(clock, interval=10)

    def record() -> logging.LogRecord:
        message = "socket.accept() out of system resource"
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, None)

    assert [repeats.filter(record()) for _ in range(5)] == [True, False, False, False, False]
    clock.advance(11)
    later = record()
    assert repeats.filter(later) and later.getMessage().endswith("(4 similar lines suppressed)")


def test_the_ingress_flags() -> None:
    parser = argparse.ArgumentParser()
    add_ingress_arguments(parser)
    limits = limits_from_args(parser.parse_args([]))
    assert limits == IngressLimits()
    given = parser.parse_args(
        [
            "--ingress-header-timeout", "5s", "--ingress-body-timeout", "30s", "--ingress-keepalive-timeout", "1m",
            "--ingress-max-connections", "100", "--ingress-max-connections-per-client", "10",
            "--trusted-proxies", "10.0.0.0/8, 192.0.2.7,2001:db8::/32",
        ]
    )  # fmt: skip
    limits = limits_from_args(given)
    assert (limits.header_timeout, limits.body_timeout, limits.keepalive_timeout) == (5, 30, 60)
    assert (limits.max_connections, limits.max_connections_per_client) == (100, 10)
    assert limits.trusted_proxies == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("192.0.2.7/32"),
        ipaddress.ip_network("2001:db8::/32"),
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--trusted-proxies", "10.0.0.0/8,nonsense", "'nonsense' is not an address or CIDR network"),
        ("--ingress-max-connections", "0", "must be at least 1"),
        ("--ingress-max-connections-per-client", "many", "must be a whole number"),
        ("--ingress-header-timeout", "0s", "must be positive"),
    ],
)
def test_bad_ingress_flags_name_the_problem(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_ingress_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args([flag, value])
    err = capsys.readouterr().err
    assert flag in err and message in err


def test_no_networks() -> None:
    assert parse_networks("") == ()


def test_the_connection_limit_leaves_files_for_the_agent() -> None:
    out = Recorder()
    guard = ConnectionGuard(IngressLimits(max_connections=4096), log=RateLimitedLog(out, FakeClock()), files=1024)
    assert guard.max_connections == 512
    assert out.lines[0][1] == "ingress connection limit lowered to fit the open-files limit"
    roomy = ConnectionGuard(IngressLimits(max_connections=4096), log=RateLimitedLog(out, FakeClock()), files=65536)
    assert roomy.max_connections == 4096 and len(out.lines) == 1
