"""The one address parser: every form a flag accepts, IPv6 in brackets, and bad input naming the flag."""

from __future__ import annotations

import pytest

from caravanserai.text.addresses import (
    Address,
    AddressError,
    UnixSocket,
    is_loopback,
    parse_address,
    parse_docker_host,
    parse_listen,
    parse_listen_or_unix,
    parse_port,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:7420", Address("127.0.0.1", 7420)),
        ("api.example:80", Address("api.example", 80)),
        ("localhost:0", Address("localhost", 0)),
        ("[::1]:7420", Address("::1", 7420)),
        ("[fe80::1%eth0]:9", Address("fe80::1%eth0", 9)),
        ("::1:7420", Address("::1", 7420)),  # unbracketed IPv6: split at the last colon
        ("0.0.0.0:65535", Address("0.0.0.0", 65535)),
    ],
)
def test_host_and_port(text: str, expected: Address) -> None:
    assert parse_address(text) == expected
    assert parse_address(text) == (expected.host, expected.port)  # a named tuple: unpacks like one


@pytest.mark.parametrize(
    "text", ["7420", "host", "host:", ":7420", "host:port", "host:70000", "host:-1", "[::1]", "[::1]7420", "[]:80", ""]
)
def test_bad_host_and_port_names_the_flag(text: str) -> None:
    with pytest.raises(AddressError) as raised:
        parse_address(text, flag="--listen")
    assert str(raised.value) == f"--listen: {text!r} is not host:port"


def test_without_a_flag_the_message_is_the_value_alone() -> None:
    with pytest.raises(ValueError, match=r"^'7420' is not host:port$"):
        parse_address("7420")


def test_port_zero_only_where_the_kernel_may_pick() -> None:
    assert parse_address("a:0") == ("a", 0)
    with pytest.raises(AddressError, match="is not host:port"):
        parse_address("a:0", port_zero=False)
    assert parse_address("a:1", port_zero=False) == ("a", 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host", Address("host", 7420)),
        ("host:80", Address("host", 80)),
        ("[::1]", Address("::1", 7420)),
        ("[::1]:9", Address("::1", 9)),
        ("::1", Address("::1", 7420)),  # where a host alone is accepted, an unbracketed IPv6 address is a host
        ("fe80::1:2", Address("fe80::1:2", 7420)),
    ],
)
def test_host_alone_takes_the_default_port(text: str, expected: Address) -> None:
    assert parse_address(text, default_port=7420) == expected


@pytest.mark.parametrize("text", ["host:x", "host:", "[::1]x", ""])
def test_bad_host_alone_forms(text: str) -> None:
    with pytest.raises(AddressError, match="is not host or host:port"):
        parse_address(text, default_port=7420)


def test_port_alone_takes_the_default_host() -> None:
    assert parse_address(":8081", default_host="0.0.0.0") == ("0.0.0.0", 8081)
    assert parse_address("[::]:8081", default_host="0.0.0.0") == ("::", 8081)
    assert parse_address("10.0.0.1:8081", default_host="0.0.0.0") == ("10.0.0.1", 8081)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("off", None),
        (" OFF ", None),
        ("127.0.0.1:7423", Address("127.0.0.1", 7423)),
        ("[::1]:9", Address("::1", 9)),
        ("unix:/run/cara/w0.sock", UnixSocket("/run/cara/w0.sock")),
    ],
)
def test_listen_forms(text: str, expected: object) -> None:
    assert parse_listen_or_unix(text) == expected
    if not isinstance(expected, UnixSocket):
        assert parse_listen(text) == expected


@pytest.mark.parametrize(
    ("text", "unix", "message"),
    [
        ("unix:", True, "^--metrics-listen: 'unix:' names no socket path$"),
        ("7423", True, "^--metrics-listen: '7423' is not host:port, unix:PATH or off$"),
        ("unix:/x", False, "^--metrics-listen: 'unix:/x' is not host:port or off$"),
        ("", False, "^--metrics-listen: '' is not host:port or off$"),
        ("nope", False, "is not host:port or off"),
    ],
)
def test_bad_listen_names_the_flag(text: str, unix: bool, message: str) -> None:
    parse = parse_listen_or_unix if unix else parse_listen
    with pytest.raises(AddressError, match=message):
        parse(text, flag="--metrics-listen")


def test_listen_with_a_default_host() -> None:
    assert parse_listen(":8081", default_host="0.0.0.0") == Address("0.0.0.0", 8081)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("unix:///var/run/docker.sock", UnixSocket("/var/run/docker.sock")),
        ("tcp://docker:2376", Address("docker", 2376)),
        ("tcp://docker", Address("docker", 2375)),
        ("http://[::1]", Address("::1", 2375)),
    ],
)
def test_docker_hosts(text: str, expected: object) -> None:
    assert parse_docker_host(text) == expected


@pytest.mark.parametrize("text", ["/var/run/docker.sock", "ssh://box", "unix://", "docker:2375"])
def test_unsupported_docker_hosts(text: str) -> None:
    with pytest.raises(AddressError, match=r"unsupported Docker address .* \(use unix:// or tcp://\)"):
        parse_docker_host(text)


@pytest.mark.parametrize(
    ("text", "loopback"),
    [
        ("127.0.0.1:7420", True),
        ("127.1.2.3:0", True),
        ("localhost:80", True),
        ("[::1]:7420", True),
        ("0.0.0.0:7420", False),
        ("10.0.0.5:7421", False),
        ("[::]:80", False),
        ("unix:/run/x.sock", False),
        ("localhost", False),  # not a listen address at all
    ],
)
def test_loopback(text: str, loopback: bool) -> None:
    assert is_loopback(text) is loopback


def test_address_text_brackets_ipv6() -> None:
    assert str(Address("::1", 7420)) == "[::1]:7420"
    assert str(Address("10.0.0.1", 80)) == "10.0.0.1:80"


def test_a_port_alone() -> None:
    assert parse_port("0") == 0
    assert parse_port("65535", port_zero=False) == 65535
    for bad in ("", "x", "-1", "65536", " 80"):
        with pytest.raises(AddressError, match=r"is not a port \(0-65535\)"):
            parse_port(bad)
    with pytest.raises(AddressError, match=r"^--port: '0' is not a port \(1-65535\)$"):
        parse_port("0", flag="--port", port_zero=False)
