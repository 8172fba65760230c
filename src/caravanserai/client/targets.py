"""API server addresses: one (`host:port`) or several (`a:7420,b:7420`), and the gRPC channel target for them.

Every client process (`caractrl`, the agent, the controllers, users' programs) reads its servers from
`--server` or `$CARA_SERVER`; both take a comma-separated list. This module is the one place that turns such a
list into a gRPC channel:

* **One address** is passed to gRPC as it is (DNS resolution, re-resolved by gRPC on reconnect).
* **Several addresses** become one `ipv4:`/`ipv6:` target listing every server (host names are resolved once,
  when the client is made), balanced with gRPC's `round_robin` policy: each call goes to a server whose
  connection is up and whose gRPC health service says SERVING, a server that goes away is skipped from the next
  call on and reconnected in the background. An apiserver that is stopping says NOT_SERVING first and serves on
  for its `--shutdown-delay`, so new calls go to the others before it refuses any; one still filling its caches
  is not called yet. Calls that were in flight on a lost connection fail with UNAVAILABLE, which `Client.call`
  retries on the others within its retry budget.
* **TLS** still checks the server's name: the channel's authority is the first address's host, so every
  apiserver must present a certificate naming that host (`deploy/certs.sh` makes one `apiserver` certificate
  with every apiserver host in `APISERVER_HOSTS`; install it on each of them).
* Bad input raises `ValueError` naming the entry.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from caravanserai.text.addresses import Address, parse_address

DEFAULT_PORT = 7420
"""The API server's port, for an address given without one."""
DEFAULT_SERVER = f"127.0.0.1:{DEFAULT_PORT}"
_SCHEMES = ("http://", "https://", "grpc://")
BALANCED = json.dumps({"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}})
"""The service config of a channel to several apiservers: round robin over those whose health says SERVING."""


@dataclass(frozen=True, slots=True)
class ChannelTarget:
    """What `grpc.aio.*_channel` needs: the target string and the extra channel options that go with it."""

    target: str
    options: tuple[tuple[str, str], ...] = ()


def server_address(explicit: str | None = None) -> str:
    """The API address(es): `explicit`, else $CARA_SERVER, else 127.0.0.1:7420, normalized.

    Each entry loses a leading `http://`/`https://`/`grpc://` and a trailing `/`; entries are joined by `,`.
    """
    address = explicit or os.environ.get("CARA_SERVER") or DEFAULT_SERVER
    return ",".join(split_servers(address))


def split_servers(address: str) -> list[str]:
    """The entries of a comma-separated server list, normalized; ValueError for an empty entry."""
    entries = []
    for raw in address.split(","):
        entry = raw.strip()
        for scheme in _SCHEMES:
            if entry.startswith(scheme):
                entry = entry[len(scheme) :]
        entry = entry.rstrip("/")
        if not entry:
            raise ValueError(f"server list {address!r} has an empty entry")
        entries.append(entry)
    return entries


def _server(entry: str) -> Address:
    """`host:port` or `[v6]:port` of one entry; ValueError naming the entry when malformed."""
    return parse_address(entry, flag="server", port_zero=False)


def _resolve(host: str, port: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ValueError(f"server {host}:{port}: cannot resolve {host!r} ({exc.strerror})") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)  # IPv4 first
    return ipaddress.ip_address(infos[0][4][0])


def channel_target(address: str) -> ChannelTarget:
    """The gRPC target for `address` (one server or a comma-separated list); see the module docstring."""
    entries = split_servers(address)
    if len(entries) == 1:
        return ChannelTarget(entries[0])
    resolved = []
    for entry in entries:
        host, port = _server(entry)
        resolved.append((_resolve(host, port), port))
    versions = {ip.version for ip, _ in resolved}
    if len(versions) > 1:
        raise ValueError(f"server list {address!r} mixes IPv4 and IPv6 addresses")
    if versions == {4}:
        target = "ipv4:" + ",".join(f"{ip}:{port}" for ip, port in resolved)
    else:
        target = "ipv6:" + ",".join(f"[{ip}]:{port}" for ip, port in resolved)
    first = _server(entries[0])
    return ChannelTarget(
        target,
        (
            ("grpc.service_config", BALANCED),
            ("grpc.default_authority", str(first)),
            ("grpc.ssl_target_name_override", first.host),
        ),
    )


def channel_options(*, own_connection: bool) -> list[tuple[str, Any]]:
    """gRPC channel options of every client: message sizes, keepalives, reconnect backoff; `own_connection` keeps
    the client off the process-wide subchannel pool (a connection of its own)."""
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", 256 * 1024 * 1024),
        ("grpc.max_send_message_length", 8 * 1024 * 1024),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.initial_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 2_000),
    ]
    if own_connection:
        options.append(("grpc.use_local_subchannel_pool", 1))
    return options


__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_SERVER",
    "ChannelTarget",
    "channel_options",
    "channel_target",
    "server_address",
    "split_servers",
]
