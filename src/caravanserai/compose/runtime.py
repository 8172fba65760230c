"""The container settings a Compose user needs (the Project spec's Compose keys): user, capabilities, privileged,
devices, shm_size, stop signal and grace period, init, extra hosts, network mode, labels, ulimits, sysctls and
logging. Each is copied with Compose's meaning; the apiserver checks the values (and that only an admin asks for
privileged, devices or the host network)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from caravanserai import v1
from caravanserai.compose.context import Context
from caravanserai.compose.problems import join
from caravanserai.compose.services import pairs
from caravanserai.compose.units import boolean, duration, integer, size, text

_SCALARS: tuple[tuple[str, Callable[[Any], object]], ...] = (
    ("user", text),
    ("privileged", boolean),
    ("init", boolean),
    ("shm_size", size),
    ("stop_signal", str),
    ("stop_grace_period", duration),
)
"""The service keys copied onto the field of the same name, each through its reader."""

_NETWORK_MODES = {"": "", "bridge": "", "default": "", "host": "host"}


def _devices(entries: list[Any], ctx: Context, path: str) -> list[v1.DeviceMapping]:
    """`HOST[:CONTAINER[:PERMISSIONS]]` or `{source, target, permissions}`."""
    result = []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict):
            parts = [str(entry.get("source", "")), str(entry.get("target", "")), str(entry.get("permissions", ""))]
        else:
            parts = ([*str(entry).split(":"), "", ""])[:3]
            if str(entry).count(":") > 2:
                raise ctx.error(join(join(path, "devices"), index), f"is not HOST[:CONTAINER[:rwm]]: {entry!r}")
        result.append(v1.DeviceMapping(host_path=parts[0], container_path=parts[1], permissions=parts[2]))
    return result


def _extra_hosts(value: object, ctx: Context, path: str) -> list[v1.HostAlias]:
    """`host:ip` / `host=ip` items (IPv6 addresses may be in brackets), or a mapping host → ip or list of ips."""
    result = []
    if isinstance(value, dict):
        for host, ips in value.items():
            for ip in ips if isinstance(ips, list) else [ips]:
                result.append(v1.HostAlias(hostname=host, ip=text(ip).strip("[]")))
        return result
    for index, item in enumerate(value if isinstance(value, list) else []):
        entry = str(item)
        separator = "=" if "=" in entry else ":"
        host, found, ip = entry.partition(separator)
        if not found or not host or not ip:
            raise ctx.error(join(join(path, "extra_hosts"), index), f"is not HOST:IP or HOST=IP: {entry!r}")
        result.append(v1.HostAlias(hostname=host, ip=ip.strip("[]")))
    return result


def _ulimits(value: dict[str, Any], ctx: Context, path: str) -> list[v1.Ulimit]:
    result = []
    for name, limit in value.items():
        where = join(join(path, "ulimits"), name)
        try:
            if isinstance(limit, dict):
                soft, hard = integer(limit.get("soft")), integer(limit.get("hard"))
            else:
                soft = hard = integer(limit)
        except ValueError as exc:
            raise ctx.error(where, str(exc)) from None
        result.append(v1.Ulimit(name=name, soft=soft, hard=hard))
    return result


def _network_mode(value: object, ctx: Context, path: str) -> str:
    mode = str(value)
    if mode in _NETWORK_MODES:
        return _NETWORK_MODES[mode]
    if mode == "none":
        raise ctx.error(path, "network_mode none has no equivalent: a service is always on the project network")
    raise ctx.error(path, f"network_mode {mode!r} has no equivalent: services of a project share one network (or host)")


def apply_runtime(service: dict[str, Any], out: v1.Service, ctx: Context, path: str) -> None:
    """Copies the service's container settings onto `out`."""
    for key, parse in _SCALARS:
        if service.get(key) in (None, ""):
            continue
        try:
            setattr(out, key, parse(service[key]))
        except ValueError as exc:
            raise ctx.error(join(path, key), str(exc)) from None
    out.cap_add.extend(str(c) for c in service.get("cap_add") or [])
    out.cap_drop.extend(str(c) for c in service.get("cap_drop") or [])
    out.devices.extend(_devices(service.get("devices") or [], ctx, path))
    out.extra_hosts.extend(_extra_hosts(service.get("extra_hosts"), ctx, path))
    if "network_mode" in service:
        out.network_mode = _network_mode(service["network_mode"], ctx, join(path, "network_mode"))
    for label, value in pairs(service.get("labels")):
        out.labels[label] = text(value)
    out.ulimits.extend(_ulimits(service.get("ulimits") or {}, ctx, path))
    for sysctl, value in pairs(service.get("sysctls")):
        out.sysctls[sysctl] = text(value)
    logging = service.get("logging")
    if logging:
        out.logging.driver = str(logging.get("driver", ""))
        for key, value in (logging.get("options") or {}).items():
            out.logging.options[key] = text(value)


__all__ = ["apply_runtime"]
