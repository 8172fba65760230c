"""`ports:` and `expose:` to `spec.services[].ports`.

* Short syntax `[HOST_IP:][HOST_PORT:]CONTAINER_PORT[/PROTOCOL]` (IPv6 host addresses in brackets), a number, or
  the long syntax (`target`, `published`, `host_ip`, `protocol`, `name`, `mode`, `app_protocol`).
* Ranges of equal length (`8000-8002:9000-9002`) are expanded port by port; a host range for a single container
  port (Compose picks one free host port of the range) is refused.
* A container port without a host port is published by Compose on a random host port; a Project publishes only a
  stated host port, so it is reachable on the project network only, which is said once per port.
* `expose:` ports are container ports (reachable on the project network, as every port is).
"""

from __future__ import annotations

import re
from typing import Any

from caravanserai import v1
from caravanserai.compose.context import Context
from caravanserai.compose.problems import join
from caravanserai.compose.units import integer

_SHORT = re.compile(
    r"^(?:(?:\[(?P<ip6>[0-9a-fA-F:.]+)\]|(?P<ip>\d{1,3}(?:\.\d{1,3}){3})):)?(?:(?P<host>[0-9]*(?:-[0-9]+)?):)?"
    r"(?P<container>[0-9]+(?:-[0-9]+)?)(?:/(?P<protocol>[a-zA-Z]+))?$"
)
_PROTOCOLS = {"tcp": "TCP", "udp": "UDP"}


def _range(text: str, ctx: Context, path: str) -> list[int]:
    first, _, last = text.partition("-")
    try:
        low, high = int(first), int(last or first)
    except ValueError:
        raise ctx.error(path, f"is not a port or port range: {text!r}") from None
    if not 1 <= low <= high <= 65535:
        raise ctx.error(path, f"is not a port or port range: {text!r} (1-65535, low-high)")
    return list(range(low, high + 1))


def _protocol(text: str, ctx: Context, path: str) -> str:
    found = _PROTOCOLS.get(text.lower() if text else "tcp")
    if found is None:
        raise ctx.error(path, f"protocol {text!r} is not supported (tcp or udp)")
    return found


def _pairs(container: list[int], host: list[int], ctx: Context, path: str) -> list[tuple[int, int]]:
    if not host:
        return [(port, 0) for port in container]
    if len(host) != len(container):
        problem = "a host port range must be as long as the container port range"
        if len(container) == 1:
            problem = "a host port range for one container port (Compose picks a free one) has no equivalent"
        raise ctx.error(path, f"{problem}: publish one stated host port per container port")
    return list(zip(container, host, strict=True))


def _short(entry: str, ctx: Context, path: str) -> list[v1.ServicePort]:
    match = _SHORT.match(entry.strip())
    if match is None:
        raise ctx.error(path, f"is not a port mapping: {entry!r} (e.g. 8080:80, 127.0.0.1:8080:80/udp)")
    container = _range(match.group("container"), ctx, path)
    host = _range(match.group("host"), ctx, path) if match.group("host") else []
    protocol = _protocol(match.group("protocol") or "", ctx, path)
    host_ip = match.group("ip6") or match.group("ip") or ""
    return [
        v1.ServicePort(container_port=c, host_port=h, protocol=protocol, host_ip=host_ip if h else "")
        for c, h in _pairs(container, host, ctx, path)
    ]


def _long(entry: dict[str, Any], ctx: Context, path: str) -> list[v1.ServicePort]:
    if "target" not in entry:
        raise ctx.error(join(path, "target"), "is required (the container port)")
    container = _range(str(entry["target"]), ctx, join(path, "target"))
    published = entry.get("published")
    host = _range(str(published), ctx, join(path, "published")) if published not in (None, "") else []
    protocol = _protocol(str(entry.get("protocol", "")), ctx, join(path, "protocol"))
    if "app_protocol" in entry:
        ctx.note(join(path, "app_protocol"), "has no equivalent: left out")
    if entry.get("mode") not in (None, "host", "ingress"):
        raise ctx.error(join(path, "mode"), f"must be host or ingress, not {entry['mode']!r}")
    name = str(entry.get("name", ""))
    ports = [
        v1.ServicePort(container_port=c, host_port=h, protocol=protocol, host_ip=str(entry.get("host_ip", "")))
        for c, h in _pairs(container, host, ctx, path)
    ]
    if name and len(ports) == 1:
        ports[0].name = name
    return ports


def convert_ports(service: dict[str, Any], ctx: Context, path: str) -> list[v1.ServicePort]:
    """The service's `ports` then its `expose` ports not already listed."""
    ports: list[v1.ServicePort] = []
    for index, entry in enumerate(service.get("ports") or []):
        where = join(join(path, "ports"), index)
        if isinstance(entry, dict):
            found = _long(entry, ctx, where)
        else:
            found = _short(str(integer(entry)) if isinstance(entry, (int, float)) else str(entry), ctx, where)
        for port in found:
            if not port.host_port:
                ctx.note(
                    where,
                    f"container port {port.container_port} is published by Compose on a random host port; here it "
                    "is reachable on the project network only (write HOST:CONTAINER to publish it)",
                )
        ports.extend(found)
    listed = {(p.container_port, p.protocol) for p in ports}
    for index, entry in enumerate(service.get("expose") or []):
        where = join(join(path, "expose"), index)
        for port in _short(str(entry), ctx, where):
            if (port.container_port, port.protocol) not in listed:
                listed.add((port.container_port, port.protocol))
                ports.append(port)
    return ports


__all__ = ["convert_ports"]
