"""How a service's container runs, for `caractrl describe project`: one line per run option the service sets
(user, capabilities, devices, tmpfs …); options left at Docker's defaults are not shown."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.layout import listing, quantities


def _ulimit(u: v1.Ulimit) -> str:
    return f"{u.name}={_limit(u.soft)}:{_limit(u.hard)}"


def _limit(value: int) -> str:
    return "unlimited" if value == -1 else str(value)


def _tmpfs(t: v1.TmpfsMount) -> str:
    options = [f"size {t.size}"] * bool(t.size) + [f"mode 0o{t.mode:o}"] * bool(t.mode)
    return t.mount_path + (f" ({', '.join(options)})" if options else "")


def _device(d: v1.DeviceMapping) -> str:
    return f"{d.host_path} -> {d.container_path or d.host_path} ({d.permissions or 'rwm'})"


def _logging(logging: v1.Logging) -> str:
    options = quantities(logging.options) if logging.options else ""
    return (logging.driver or "(engine default)") + (f" ({options})" if options else "")


def run_option_fields(service: v1.Service) -> list[tuple[str, str]]:
    """(label, text) for each run option `service` sets, in the order of the spec."""
    fields = [
        ("User", service.user),
        ("Cap Add", ", ".join(service.cap_add)),
        ("Cap Drop", ", ".join(service.cap_drop)),
        ("Privileged", "yes" if service.privileged else ""),
        ("Devices", listing(_device(d) for d in service.devices) if service.devices else ""),
        ("Tmpfs", listing(_tmpfs(t) for t in service.tmpfs) if service.tmpfs else ""),
        ("Shm Size", service.shm_size),
        ("Stop Signal", service.stop_signal),
        ("Stop Grace Period", service.stop_grace_period),
        ("Init", "yes" if service.init else ""),
        ("Extra Hosts", ", ".join(f"{h.hostname}={h.ip}" for h in service.extra_hosts)),
        ("Network Mode", service.network_mode),
        ("Labels", quantities(service.labels) if service.labels else ""),
        ("Ulimits", ", ".join(_ulimit(u) for u in service.ulimits)),
        ("Sysctls", quantities(service.sysctls) if service.sysctls else ""),
        ("Logging", _logging(service.logging) if service.HasField("logging") else ""),
    ]
    return [(label, text) for label, text in fields if text]


__all__ = ["run_option_fields"]
