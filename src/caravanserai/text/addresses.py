"""Network addresses as operators type them: the one parser behind every `--listen`, `--*-listen` and `--server`,
and `cara up`'s check of `--docker-host` (the agent itself hands that URL to aiodocker, `agent/docker/calls.py`).

    parse_address("[::1]:7420")                          → Address("::1", 7420)
    parse_address("api", default_port=7420)              → Address("api", 7420)
    parse_listen("off", flag="--ingress-listen")         → None
    parse_listen_or_unix("unix:/run/w0.sock")            → UnixSocket("/run/w0.sock")
    parse_docker_host("tcp://docker")                    → Address("docker", 2375)

Forms, each accepted where the caller asks for it:

* **`host:port`** everywhere: a name, an IPv4 address or an IPv6 address in brackets (`[::1]:7420`). The port is
  0–65535 (0: the kernel picks one), or 1–65535 with `port_zero=False` where a port is dialled or shown. An IPv6
  address without brackets is split at its last colon (`::1:7420` → `::1`, 7420), as the flags always read it.
* **`port`** alone (`parse_port`), for flags that take a port and no host (`caractrl port-forward 8080:80`).
* **`host`** alone with `default_port` (an API server to route to; there an unbracketed IPv6 address is a host).
* **`:port`** with `default_host` (the ingress: `:8081` listens on every interface).
* **`off`** (any case, blanks around it ignored) for a listener that can be switched off (`parse_listen`: None).
* **`unix:PATH`** for a listener on a Unix socket, with `parse_listen_or_unix` (how the apiserver's worker
  supervisor reaches its workers).
* **Docker Engine URLs** (`parse_docker_host`): `unix:///path/to/socket`, or `tcp://host[:port]` (port 2375).

Guarantees: the result is a frozen record (`Address` is a named tuple, so `host, port = address` works); bad input
raises `AddressError` (a ValueError) whose message names the flag (`flag`, when given) and the forms it accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

OFF = "off"
"""The value that switches an optional listener off (`--ingress-listen off`, `--metrics-listen off`)."""

UNIX = "unix:"
"""Prefix of a Unix-socket listener: `unix:PATH`."""

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
"""Where the agent finds Docker unless `--docker-host` says otherwise."""

DOCKER_TCP_PORT = 2375
"""The Docker Engine's plain TCP port, for a `tcp://host` without one."""

_LOOPBACK_NAMES = ("localhost", "::1")


class AddressError(ValueError):
    """An address that is none of the forms its flag accepts; the message names the flag and the forms."""


class Address(NamedTuple):
    """A host (name, IPv4 or IPv6 address, without brackets) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        """`host:port`, the host in brackets when it is an IPv6 address."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        """Whether a listener on this address binds only the loopback interface."""
        return self.host in _LOOPBACK_NAMES or self.host.startswith("127.")


@dataclass(frozen=True, slots=True)
class UnixSocket:
    """A Unix-domain socket path."""

    path: str


Listen = Address | UnixSocket | None
"""What a listener flag says: a TCP address, a Unix socket, or None for `off`."""


def parse_address(
    text: str,
    *,
    flag: str = "",
    default_host: str | None = None,
    default_port: int | None = None,
    port_zero: bool = True,
) -> Address:
    """`host:port` (or `[v6]:port`) → Address; a missing host or port takes its default when one is given.

    AddressError naming `flag` when `text` is not one of the accepted forms (see the module docstring)."""
    forms = "host:port" if default_port is None else "host or host:port"
    host, port_text = _split(text, host_alone=default_port is not None)
    if host is None or (not host and default_host is None):
        raise _error(flag, text, forms)
    if port_text is None and default_port is not None:
        return Address(host or str(default_host), default_port)
    port = _port(port_text, zero=port_zero)
    if port is None:
        raise _error(flag, text, forms)
    return Address(host or str(default_host), port)


def is_off(text: str) -> bool:
    """Whether a listener flag's value is `off` (any case, blanks around it ignored)."""
    return text.strip().lower() == OFF


def parse_listen(text: str, *, flag: str = "", default_host: str | None = None) -> Address | None:
    """A listener flag: `host:port`, or `off` (None); AddressError naming `flag`."""
    if is_off(text):
        return None
    return _listen_address(text, flag=flag, default_host=default_host, forms="host:port or off")


def parse_listen_or_unix(text: str, *, flag: str = "") -> Listen:
    """A listener flag that may name a Unix socket: `host:port`, `unix:PATH` or `off` (None); AddressError naming
    `flag`."""
    if text.startswith(UNIX):
        path = text[len(UNIX) :]
        if not path:
            raise AddressError(_named(flag, f"{text!r} names no socket path"))
        return UnixSocket(path)
    if is_off(text):
        return None
    return _listen_address(text, flag=flag, default_host=None, forms="host:port, unix:PATH or off")


def parse_docker_host(text: str, *, flag: str = "") -> Address | UnixSocket:
    """A Docker Engine URL: `unix:///path` → UnixSocket, `tcp://host[:port]` (or `http://`) → Address."""
    scheme, sep, rest = text.partition("://")
    if sep and scheme == "unix" and rest:
        return UnixSocket(rest)
    if sep and scheme in ("tcp", "http"):
        return parse_address(rest, flag=flag, default_port=DOCKER_TCP_PORT, port_zero=False)
    raise AddressError(_named(flag, f"unsupported Docker address {text} (use unix:// or tcp://)"))


def is_loopback(address: str) -> bool:
    """Whether a listen address (`host:port`) binds only the loopback interface; False for what is not one."""
    try:
        return parse_address(address).is_loopback
    except AddressError:
        return False


def _listen_address(text: str, *, flag: str, default_host: str | None, forms: str) -> Address:
    try:
        return parse_address(text, default_host=default_host)
    except AddressError:
        raise _error(flag, text, forms) from None


def _split(text: str, *, host_alone: bool) -> tuple[str | None, str | None]:
    """(host, port text) of `text`; port None when there is none, host None when the brackets are broken."""
    if text.startswith("["):
        host, close, rest = text[1:].partition("]")
        if not close or not host or (rest and not rest.startswith(":")):
            return None, None
        return host, rest[1:] if rest else None
    host, sep, port = text.rpartition(":")
    if not sep or (host_alone and ":" in host):
        return text, None
    return host, port


def parse_port(text: str, *, flag: str = "", port_zero: bool = True) -> int:
    """A port alone: 0–65535, or 1–65535 with `port_zero=False`; AddressError naming `flag` otherwise."""
    port = _port(text, zero=port_zero)
    if port is None:
        raise AddressError(_named(flag, f"{text!r} is not a port ({0 if port_zero else 1}-65535)"))
    return port


def _port(text: str | None, *, zero: bool) -> int | None:
    if text is None or not text.isdigit() or not (0 if zero else 1) <= int(text) <= 65535:
        return None
    return int(text)


def _named(flag: str, message: str) -> str:
    return f"{flag}: {message}" if flag else message


def _error(flag: str, text: str, forms: str) -> AddressError:
    return AddressError(_named(flag, f"{text!r} is not {forms}"))


__all__ = [
    "DEFAULT_DOCKER_HOST",
    "DOCKER_TCP_PORT",
    "OFF",
    "UNIX",
    "Address",
    "AddressError",
    "Listen",
    "UnixSocket",
    "is_loopback",
    "is_off",
    "parse_address",
    "parse_docker_host",
    "parse_listen",
    "parse_listen_or_unix",
    "parse_port",
]
