"""The rules of how a service's container runs (the Compose keys of a service; names and conversions in
`caravanserai.project.runoptions`). Each violation names its field:

* `user`: `uid`, `uid:gid`, `name` or `name:group` (letters, digits, `_`, `.`, `-`);
* `capAdd[i]`, `capDrop[i]`: known Linux capabilities (with or without `CAP_`) or `ALL`, each once;
* `devices[i]`: absolute `hostPath` (required) and `containerPath`, `permissions` a subset of `rwm`;
* `tmpfs[i]`: an absolute `mountPath` that no volume mount of the service uses, `size` a positive quantity,
  `mode` within 0..0o7777;
* `shmSize`: a positive quantity; `stopSignal`: a known signal; `stopGracePeriod`: a duration of at most 1h;
* `extraHosts[i]`: a host name without spaces or `:`, an IP address or `host-gateway`;
* `networkMode`: "" or "host"; with "host" a port is the container's own, so `hostPort` is 0 or equal to
  `containerPort` and `hostIp` empty (nothing is mapped);
* `labels`: keys without whitespace, none under `caravanserai.io/` (the agent's own labels);
* `ulimits[i]`: a known name, once each, values at least -1 (unlimited), soft not above hard;
* `sysctls`: namespaced ones only, no `net.*` with networkMode host;
* `logging.driver`: a name without whitespace; `logging.options` need a driver.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from caravanserai import v1
from caravanserai.apiserver import validation
from caravanserai.project import runoptions
from caravanserai.text.durations import parse_duration
from caravanserai.text.violations import Violations, key_path, quote

RESERVED_LABEL_PREFIX = "caravanserai.io/"
MAX_TMPFS_MODE = 0o7777
MAX_STOP_GRACE_SECONDS = 3600.0
HOST_GATEWAY = "host-gateway"
_USER = re.compile(r"^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?$")
_NAME = re.compile(r"^[^\s:]+$")
_KEY = re.compile(r"^\S+$")


def run_options(errors: Violations, path: str, service: v1.Service) -> None:
    """Check every run option of one service (see the module docstring)."""
    if service.user and not _USER.fullmatch(service.user):
        errors.add(f"{path}.user", f'must be "uid", "uid:gid", "name" or "name:group", not {quote(service.user)}')
    _capabilities(errors, f"{path}.capAdd", service.cap_add)
    _capabilities(errors, f"{path}.capDrop", service.cap_drop)
    for i, device in enumerate(service.devices):
        _device(errors, f"{path}.devices[{i}]", device)
    for i, tmpfs in enumerate(service.tmpfs):
        _tmpfs(errors, f"{path}.tmpfs[{i}]", tmpfs, service)
    errors.unique(((f"{path}.tmpfs[{i}].mountPath", t.mount_path) for i, t in enumerate(service.tmpfs)), "tmpfs")
    if service.shm_size:
        _positive_quantity(errors, f"{path}.shmSize", service.shm_size)
    if service.stop_signal and runoptions.stop_signal(service.stop_signal) is None:
        errors.add(f"{path}.stopSignal", f"must be a signal name such as SIGTERM, not {quote(service.stop_signal)}")
    if service.stop_grace_period:
        _grace(errors, f"{path}.stopGracePeriod", service.stop_grace_period)
    for i, alias in enumerate(service.extra_hosts):
        _host_alias(errors, f"{path}.extraHosts[{i}]", alias)
    _network_mode(errors, path, service)
    _labels(errors, f"{path}.labels", service)
    for i, ulimit in enumerate(service.ulimits):
        _ulimit(errors, f"{path}.ulimits[{i}]", ulimit)
    errors.unique(((f"{path}.ulimits[{i}].name", u.name) for i, u in enumerate(service.ulimits)), "ulimit")
    host = service.network_mode == v1.NETWORK_MODE_HOST
    for name in service.sysctls:
        errors.check(key_path(f"{path}.sysctls", name), runoptions.sysctl_problem(name, host_network=host))
    _logging(errors, f"{path}.logging", service.logging)


def _capabilities(errors: Violations, path: str, names: Sequence[str]) -> None:
    for i, name in enumerate(names):
        if runoptions.capability(name) is None:
            errors.add(f"{path}[{i}]", f"must be a Linux capability such as NET_ADMIN, or ALL, not {quote(name)}")
    errors.unique(((f"{path}[{i}]", runoptions.capability(n) or n) for i, n in enumerate(names)), "capability")


def _device(errors: Violations, path: str, device: v1.DeviceMapping) -> None:
    if errors.required(f"{path}.hostPath", device.host_path):
        validation.absolute_path(errors, f"{path}.hostPath", device.host_path)
    if device.container_path:
        validation.absolute_path(errors, f"{path}.containerPath", device.container_path)
    perms = device.permissions
    if perms and (set(perms) - set("rwm") or len(set(perms)) != len(perms)):
        errors.add(f"{path}.permissions", f'must be letters of "rwm", each at most once, not {quote(perms)}')


def _tmpfs(errors: Violations, path: str, tmpfs: v1.TmpfsMount, service: v1.Service) -> None:
    if errors.required(f"{path}.mountPath", tmpfs.mount_path):
        validation.absolute_path(errors, f"{path}.mountPath", tmpfs.mount_path)
        for j, mount in enumerate(service.volume_mounts):
            if mount.mount_path == tmpfs.mount_path:
                errors.add(f"{path}.mountPath", f"is also the mount path of volumeMounts[{j}]")
    if tmpfs.size:
        _positive_quantity(errors, f"{path}.size", tmpfs.size)
    if not 0 <= tmpfs.mode <= MAX_TMPFS_MODE:
        errors.add(f"{path}.mode", f"must be a file mode between 0 and 0o7777 (4095), not {tmpfs.mode}")


def _positive_quantity(errors: Violations, path: str, text: str) -> None:
    amount = validation.quantity(errors, path, text)
    if amount is not None and amount < 1:
        errors.add(path, f"must be at least one byte, e.g. 64Mi, not {quote(text)}")


def _grace(errors: Violations, path: str, text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        errors.add(path, str(exc))
        return
    if seconds > MAX_STOP_GRACE_SECONDS:
        errors.add(path, f"must be at most 1h, not {quote(text)}")


def _host_alias(errors: Violations, path: str, alias: v1.HostAlias) -> None:
    if errors.required(f"{path}.hostname", alias.hostname) and not _NAME.fullmatch(alias.hostname):
        errors.add(f"{path}.hostname", f"must not contain whitespace or ':', not {quote(alias.hostname)}")
    if errors.required(f"{path}.ip", alias.ip) and alias.ip != HOST_GATEWAY:
        try:
            ipaddress.ip_address(alias.ip)
        except ValueError:
            errors.add(f"{path}.ip", f"must be an IPv4 or IPv6 address or {HOST_GATEWAY}, not {quote(alias.ip)}")


def _network_mode(errors: Violations, path: str, service: v1.Service) -> None:
    errors.choice(f"{path}.networkMode", service.network_mode, v1.NETWORK_MODES[1:], empty="for the project network")
    if service.network_mode != v1.NETWORK_MODE_HOST:
        return
    for i, port in enumerate(service.ports):
        if port.host_port not in (0, port.container_port):
            errors.add(
                f"{path}.ports[{i}].hostPort",
                f"must be 0 or {port.container_port} (the containerPort) with networkMode host: the container "
                "listens on the node's own ports, nothing is mapped",
            )
        if port.host_ip:
            errors.add(f"{path}.ports[{i}].hostIp", "must be empty with networkMode host (nothing is mapped)")


def _labels(errors: Violations, path: str, service: v1.Service) -> None:
    for key in service.labels:
        if key.startswith(RESERVED_LABEL_PREFIX):
            errors.add(
                key_path(path, key), f"keys under {RESERVED_LABEL_PREFIX} are reserved for the agent's own labels"
            )
        elif not _KEY.fullmatch(key):
            errors.add(key_path(path, key), "must be a non-empty key without whitespace")


def _ulimit(errors: Violations, path: str, ulimit: v1.Ulimit) -> None:
    errors.choice(f"{path}.name", ulimit.name, runoptions.ULIMITS)
    valid = True
    for field, value in (("soft", ulimit.soft), ("hard", ulimit.hard)):
        if value < runoptions.UNLIMITED:
            errors.add(f"{path}.{field}", f"must be at least 0 (or -1 for unlimited), not {value}")
            valid = False
    if valid and runoptions.ulimit_exceeds(ulimit.soft, ulimit.hard):
        errors.add(f"{path}.soft", f"must not be above the hard limit: soft {ulimit.soft} > hard {ulimit.hard}")


def _logging(errors: Violations, path: str, logging: v1.Logging) -> None:
    if logging.driver and not _KEY.fullmatch(logging.driver):
        errors.add(f"{path}.driver", f"must be a log driver name such as json-file, not {quote(logging.driver)}")
    if logging.options and not logging.driver:
        errors.add(f"{path}.driver", "is required with options (the engine's default driver may not take them)")


__all__ = ["HOST_GATEWAY", "MAX_STOP_GRACE_SECONDS", "MAX_TMPFS_MODE", "RESERVED_LABEL_PREFIX", "run_options"]
