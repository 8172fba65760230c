"""How a service's container runs beyond image, command and resources — the Compose keys of `v1.Service` — as
Docker Engine API (1.41) fields. Pure; `containers.ContainerCreate` carries one `RunSettings` and writes it.

| spec field          | Docker                                                                            |
|---------------------|-----------------------------------------------------------------------------------|
| user                | Config.User                                                                       |
| stopSignal          | Config.StopSignal (`SIGTERM` form)                                                |
| stopGracePeriod     | Config.StopTimeout (whole seconds, rounded up); the agent's stops use it too      |
| labels              | Config.Labels, under the agent's own (which win)                                  |
| capAdd / capDrop    | HostConfig.CapAdd / CapDrop (`CAP_NET_ADMIN` form, or `ALL`)                      |
| privileged          | HostConfig.Privileged                                                             |
| devices             | HostConfig.Devices (PathOnHost, PathInContainer, CgroupPermissions default rwm)   |
| tmpfs               | HostConfig.Tmpfs (path → `size=<bytes>,mode=<octal>`)                             |
| shmSize             | HostConfig.ShmSize (bytes)                                                        |
| init                | HostConfig.Init                                                                   |
| extraHosts          | HostConfig.ExtraHosts (`host:ip`)                                                 |
| networkMode host    | HostConfig.NetworkMode `host`, no project network, no port mapping                |
| ulimits             | HostConfig.Ulimits (Name, Soft, Hard; -1 unlimited)                               |
| sysctls             | HostConfig.Sysctls                                                                |
| logging             | HostConfig.LogConfig (Type, Config)                                               |

Fields a service leaves empty are left out of the body (Docker's defaults apply), so a service that sets none of
them gets the same body as before these fields existed. An `exec` healthcheck is Docker's HEALTHCHECK
(`Healthcheck`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from caravanserai import v1
from caravanserai.project import runoptions
from caravanserai.project.servicegraph import HealthSettings
from caravanserai.text.quantity import to_int

DEFAULT_DEVICE_PERMISSIONS = "rwm"


@dataclass(frozen=True, slots=True)
class RunSettings:
    """The run options of one service in Docker's terms (see the module docstring); `stop_timeout` is None when
    the service sets no grace period (the agent's --stop-timeout then applies)."""

    user: str = ""
    cap_add: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    privileged: bool = False
    devices: tuple[tuple[str, str, str], ...] = ()  # (host path, container path, cgroup permissions)
    tmpfs: tuple[tuple[str, str], ...] = ()  # (mount path, options)
    shm_size: int = 0
    stop_signal: str = ""
    stop_timeout: int | None = None
    init: bool = False
    extra_hosts: tuple[str, ...] = ()
    host_network: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    ulimits: tuple[tuple[str, int, int], ...] = ()
    sysctls: tuple[tuple[str, str], ...] = ()
    log_driver: str = ""
    log_options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(service: v1.Service) -> RunSettings:
        """The settings of a validated service (names the apiserver accepted; unknown ones are passed as given)."""
        return RunSettings(
            user=service.user,
            cap_add=tuple(runoptions.capability(c) or c for c in service.cap_add),
            cap_drop=tuple(runoptions.capability(c) or c for c in service.cap_drop),
            privileged=service.privileged,
            devices=tuple(
                (d.host_path, d.container_path or d.host_path, d.permissions or DEFAULT_DEVICE_PERMISSIONS)
                for d in service.devices
            ),
            tmpfs=tuple((t.mount_path, _tmpfs_options(t)) for t in service.tmpfs),
            shm_size=to_int(service.shm_size) if service.shm_size else 0,
            stop_signal=runoptions.stop_signal(service.stop_signal) or service.stop_signal,
            stop_timeout=runoptions.stop_grace_seconds(service),
            init=service.init,
            extra_hosts=tuple(f"{h.hostname}:{h.ip}" for h in service.extra_hosts),
            host_network=service.network_mode == v1.NETWORK_MODE_HOST,
            labels=tuple(sorted(service.labels.items())),
            ulimits=tuple((u.name, u.soft, u.hard) for u in service.ulimits),
            sysctls=tuple(sorted(service.sysctls.items())),
            log_driver=service.logging.driver,
            log_options=tuple(sorted(service.logging.options.items())),
        )

    def config(self) -> dict[str, Any]:
        """The top-level create fields (User, StopSignal, StopTimeout), the unset ones left out."""
        fields: dict[str, Any] = {"User": self.user, "StopSignal": self.stop_signal}
        if self.stop_timeout is not None:
            fields["StopTimeout"] = self.stop_timeout
        return {key: value for key, value in fields.items() if value or key == "StopTimeout"}

    def host_config(self) -> dict[str, Any]:
        """The HostConfig fields (not NetworkMode, which the container create body decides), unset ones left out."""
        fields: dict[str, Any] = {
            "CapAdd": list(self.cap_add),
            "CapDrop": list(self.cap_drop),
            "Privileged": self.privileged,
            "Devices": [
                {"PathOnHost": host, "PathInContainer": inside, "CgroupPermissions": perms}
                for host, inside, perms in self.devices
            ],
            "Tmpfs": dict(self.tmpfs),
            "ShmSize": self.shm_size,
            "Init": self.init,
            "ExtraHosts": list(self.extra_hosts),
            "Ulimits": [{"Name": name, "Soft": soft, "Hard": hard} for name, soft, hard in self.ulimits],
            "Sysctls": dict(self.sysctls),
        }
        if self.log_driver:
            fields["LogConfig"] = {"Type": self.log_driver, "Config": dict(self.log_options)}
        return {key: value for key, value in fields.items() if value}


def _tmpfs_options(tmpfs: v1.TmpfsMount) -> str:
    options = [f"size={to_int(tmpfs.size)}"] if tmpfs.size else []
    if tmpfs.mode:
        options.append(f"mode={tmpfs.mode:o}")
    return ",".join(options)


NO_SETTINGS = RunSettings()


@dataclass(frozen=True, slots=True)
class Healthcheck:
    """Docker's HEALTHCHECK for an `exec` check: the command (`CMD` form) and its settings, times in seconds."""

    command: tuple[str, ...]
    interval: float
    timeout: float
    retries: int
    start_period: float

    @staticmethod
    def of(check: v1.HealthCheck) -> Healthcheck | None:
        """The HEALTHCHECK of an exec check (None for http/tcp checks, which the agent runs)."""
        if not check.HasField("exec"):
            return None
        settings = HealthSettings.of(check)
        return Healthcheck(
            tuple(check.exec.command), settings.interval, settings.timeout, settings.retries, settings.start_period
        )

    def body(self) -> dict[str, Any]:
        """Docker's `Healthcheck` (times in nanoseconds)."""
        nanos = 1_000_000_000
        return {
            "Test": ["CMD", *self.command],
            "Interval": int(self.interval * nanos),
            "Timeout": int(self.timeout * nanos),
            "Retries": self.retries,
            "StartPeriod": int(self.start_period * nanos),
        }


__all__ = ["DEFAULT_DEVICE_PERMISSIONS", "Healthcheck", "NO_SETTINGS", "RunSettings"]
