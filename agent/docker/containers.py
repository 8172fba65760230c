"""A project's services as Docker Engine API (1.41) create configurations. Pure functions, no I/O.

Guarantees:

* **Deterministic.** The same project, service and node always give the same configuration and the same
  `spec_hash`, so a restarted agent recognises the containers it made.
* **Kubernetes semantics for the command line.** `command` replaces the image's ENTRYPOINT and `args` its CMD;
  with `command` set and no `args`, the image's CMD is not used (Docker drops it when Entrypoint is given).
* **Restart policies**: Always (the default) → Docker `always`; OnFailure → `on-failure` (unlimited retries);
  Never → `no`.
* **Resources**: limits are enforced (`cpu` → NanoCpus, `memory` → Memory); requests become soft reservations
  (`cpu` → CpuShares relative to 1024 per core, `memory` → MemoryReservation). `nvidia.com/gpu` becomes a Docker
  device request for that many GPUs (driver nvidia); other extended resources (such as `gpu`) are counted by the
  scheduler and told to the container.
* **Hand-off**: after the service's own environment come the variables of `caravanserai.project.handoff` (node, project,
  service, the cpu/memory requests and limits, `CARA_RESOURCE_<NAME>` per extended resource).
* **Inputs**: what a service takes from Secrets and Configs (`ServiceInputs`: its resolved environment, the host
  directories of its data volumes, the digest of the data it read) is part of the configuration, and the digest
  is part of the spec hash: a change of a Secret or Config recreates exactly the services that read it.
* **Health**: an `exec` healthcheck becomes Docker's HEALTHCHECK (`CMD` form, interval, timeout, retries and
  start period in nanoseconds); http and tcp checks are run by the agent itself (`agent/workload/health.py`).
* **Networking**: every container joins the project network with its service name as DNS alias; ports with a
  host port are published on the node, the others only exposed on the project network.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from caravanserai.project import handoff
from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.text.quantity import cpu_millis, to_int
from caravanserai.project.registryauth import RegistryCredential
from caravanserai.project.servicegraph import HealthSettings

RESTART_ALWAYS = "Always"
RESTART_ON_FAILURE = "OnFailure"
RESTART_NEVER = "Never"

DOCKER_RESTART_POLICIES = {RESTART_ALWAYS: "always", RESTART_ON_FAILURE: "on-failure", RESTART_NEVER: "no"}

VOLUME_EPHEMERAL = v1.VOLUME_EPHEMERAL
VOLUME_PERSISTENT = v1.VOLUME_PERSISTENT
DOCKER_VOLUME_TYPES = (VOLUME_EPHEMERAL, VOLUME_PERSISTENT)
NVIDIA_GPU = "nvidia.com/gpu"

_NANO_CPUS_PER_MILLI = 1_000_000
_MIN_CPU_SHARES = 2


def restart_policy(service: v1.Service) -> str:
    """The service's restart policy with the default applied: Always, OnFailure or Never."""
    return service.restart_policy or RESTART_ALWAYS


def volume_type(volume: v1.Volume) -> str:
    """The volume's type with the default applied: Ephemeral or Persistent."""
    return volume.type or VOLUME_EPHEMERAL


@dataclass(frozen=True, slots=True)
class ServiceInputs:
    """What a service's container takes from Secrets and Configs.

    `env` is the service's whole environment (`NAME=value`, envFrom sources first, then `env` with valueFrom
    resolved), `mounts` the data volumes as (host directory, container path), `digest` a hash of every byte of
    data the service reads ("" when it reads none)."""

    env: tuple[str, ...]
    mounts: tuple[tuple[str, str], ...] = ()
    digest: str = ""
    auth: RegistryCredential | None = None  # for pulling the image (imagePullSecrets); not part of the digest

    @staticmethod
    def literal(service: v1.Service) -> ServiceInputs:
        """The inputs of a service that reads no Secret or Config: its literal environment."""
        return ServiceInputs(tuple(f"{env.name}={env.value}" for env in service.env))


@dataclass(frozen=True, slots=True)
class ProjectInputs:
    """The inputs of a project's services (by service name) and the services that cannot start yet because data
    they read is missing (service → what it waits for, e.g. `secret "db" (not found)`)."""

    services: Mapping[str, ServiceInputs] = field(default_factory=dict)
    blocked: Mapping[str, str] = field(default_factory=dict)

    def of(self, service: v1.Service) -> ServiceInputs:
        return self.services.get(service.name) or ServiceInputs.literal(service)


NO_INPUTS = ProjectInputs()


def spec_hash(service: v1.Service, digest: str = "") -> str:
    """A short stable hash of everything in a service's spec and of the data it reads (`digest`, see
    `ServiceInputs`); it changes exactly when either does.

    Computed over the protobuf JSON mapping with sorted keys, which does not depend on serialization details.
    """
    document = json_format.MessageToDict(service, preserving_proto_field_name=True)
    if digest:
        document["_data"] = digest
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def container_labels(project: v1.Project, service: v1.Service, *, node: str, digest: str = "") -> dict[str, str]:
    """Labels of a service's container: owner labels plus service, generation and spec hash."""
    labels = naming.owner_labels(node=node, project=project.metadata.name, project_uid=project.metadata.uid)
    labels[naming.LABEL_SERVICE] = service.name
    labels[naming.LABEL_GENERATION] = str(project.metadata.generation)
    labels[naming.LABEL_SPEC_HASH] = spec_hash(service, digest)
    return labels


def volume_labels(project: v1.Project, volume: v1.Volume, *, node: str) -> dict[str, str]:
    """Labels of a project volume: owner labels plus the volume's name and type."""
    labels = naming.owner_labels(node=node, project=project.metadata.name, project_uid=project.metadata.uid)
    labels[naming.LABEL_VOLUME] = volume.name
    labels[naming.LABEL_VOLUME_TYPE] = volume_type(volume)
    return labels


def network_config(project: v1.Project, *, node: str) -> dict[str, Any]:
    """The create configuration of the project's bridge network."""
    return {
        "Name": naming.network_name(project.metadata.name, node),
        "Driver": "bridge",
        "CheckDuplicate": True,
        "Labels": naming.owner_labels(node=node, project=project.metadata.name, project_uid=project.metadata.uid),
    }


def pool_network_config(name: str, *, node: str) -> dict[str, Any]:
    """The create configuration of a spare bridge network of `node`'s pool (`netpool`): no project label."""
    return {"Name": name, "Driver": "bridge", "CheckDuplicate": True, "Labels": naming.pool_labels(node)}


def volume_config(project: v1.Project, volume: v1.Volume, *, node: str) -> dict[str, Any]:
    """The create configuration of a project volume (local driver)."""
    return {
        "Name": naming.volume_name(project.metadata.name, volume.name, node),
        "Driver": "local",
        "Labels": volume_labels(project, volume, node=node),
    }


def port_key(port: v1.ServicePort) -> str:
    """Docker's port key, e.g. `8080/tcp`."""
    return f"{port.container_port}/{(port.protocol or 'TCP').lower()}"


def _ports(service: v1.Service) -> tuple[dict[str, Any], dict[str, list[dict[str, str]]]]:
    exposed: dict[str, Any] = {}
    bindings: dict[str, list[dict[str, str]]] = {}
    for port in service.ports:
        key = port_key(port)
        exposed[key] = {}
        if port.host_port:
            bindings.setdefault(key, []).append({"HostIp": port.host_ip, "HostPort": str(port.host_port)})
    return exposed, bindings


def _mounts(project: v1.Project, service: v1.Service, node: str, inputs: ServiceInputs) -> list[dict[str, Any]]:
    docker_volumes = {v.name for v in project.spec.volumes if volume_type(v) in DOCKER_VOLUME_TYPES}
    mounts: list[dict[str, Any]] = [
        {
            "Type": "volume",
            "Source": naming.volume_name(project.metadata.name, mount.name, node),
            "Target": mount.mount_path,
            "ReadOnly": mount.read_only,
        }
        for mount in service.volume_mounts
        if mount.name in docker_volumes
    ]
    mounts += [{"Type": "bind", "Source": source, "Target": target, "ReadOnly": True} for source, target in inputs.mounts]
    return mounts


def device_requests(resources: v1.ResourceRequirements) -> list[dict[str, Any]]:
    """Docker device requests for the GPUs a service is granted (`nvidia.com/gpu`); none without."""
    count = handoff.extended(resources).get(NVIDIA_GPU, 0)
    if not count:
        return []
    return [{"Driver": "nvidia", "Count": count, "Capabilities": [["gpu"]]}]


def resource_settings(resources: v1.ResourceRequirements) -> dict[str, int]:
    """HostConfig resource fields for a service's requests and limits (absent ones are left out)."""
    settings: dict[str, int] = {}
    if "cpu" in resources.limits:
        settings["NanoCpus"] = cpu_millis(resources.limits["cpu"]) * _NANO_CPUS_PER_MILLI
    if "memory" in resources.limits:
        settings["Memory"] = to_int(resources.limits["memory"])
    if "cpu" in resources.requests:
        settings["CpuShares"] = max(_MIN_CPU_SHARES, cpu_millis(resources.requests["cpu"]) * 1024 // 1000)
    if "memory" in resources.requests:
        settings["MemoryReservation"] = to_int(resources.requests["memory"])
    return settings


def docker_healthcheck(check: v1.HealthCheck) -> dict[str, Any] | None:
    """Docker's `Healthcheck` for an exec check (None for http/tcp checks, which the agent runs)."""
    if not check.HasField("exec"):
        return None
    settings = HealthSettings.of(check)
    nanos = 1_000_000_000
    return {
        "Test": ["CMD", *check.exec.command],
        "Interval": int(settings.interval * nanos),
        "Timeout": int(settings.timeout * nanos),
        "Retries": settings.retries,
        "StartPeriod": int(settings.start_period * nanos),
    }


def container_config(
    project: v1.Project,
    service: v1.Service,
    *,
    node: str,
    inputs: ServiceInputs | None = None,
    network: str = "",
) -> dict[str, Any]:
    """The body of `POST /containers/create` for one service of `project`, run by the agent of `node`, with the
    `inputs` it takes from Secrets and Configs (none: its literal environment), on the project's `network` (by
    default `cara_<project>_<node>`; the agent's network pool may give it another, see `netpool`)."""
    inputs = inputs or ServiceInputs.literal(service)
    network = network or naming.network_name(project.metadata.name, node)
    exposed, bindings = _ports(service)
    host_config: dict[str, Any] = {
        "NetworkMode": network,
        "RestartPolicy": {"Name": DOCKER_RESTART_POLICIES[restart_policy(service)], "MaximumRetryCount": 0},
        **resource_settings(service.resources),
    }
    if bindings:
        host_config["PortBindings"] = bindings
    mounts = _mounts(project, service, node, inputs)
    if mounts:
        host_config["Mounts"] = mounts
    devices = device_requests(service.resources)
    if devices:
        host_config["DeviceRequests"] = devices
    granted = handoff.environment(service, node=node, project=project.metadata.name)
    config: dict[str, Any] = {
        "Image": service.image,
        "Hostname": service.name,
        "Env": [*inputs.env, *(f"{name}={value}" for name, value in granted.items())],
        "Labels": container_labels(project, service, node=node, digest=inputs.digest),
        "HostConfig": host_config,
        "NetworkingConfig": {"EndpointsConfig": {network: {"Aliases": [service.name]}}},
    }
    if service.command:
        config["Entrypoint"] = list(service.command)
    if service.args:
        config["Cmd"] = list(service.args)
    if exposed:
        config["ExposedPorts"] = exposed
    if service.working_dir:
        config["WorkingDir"] = service.working_dir
    healthcheck = docker_healthcheck(service.healthcheck) if service.HasField("healthcheck") else None
    if healthcheck is not None:
        config["Healthcheck"] = healthcheck
    return config


__all__ = [
    "DOCKER_RESTART_POLICIES",
    "DOCKER_VOLUME_TYPES",
    "NVIDIA_GPU",
    "RESTART_ALWAYS",
    "RESTART_NEVER",
    "NO_INPUTS",
    "ProjectInputs",
    "RESTART_ON_FAILURE",
    "ServiceInputs",
    "VOLUME_EPHEMERAL",
    "VOLUME_PERSISTENT",
    "container_config",
    "container_labels",
    "device_requests",
    "docker_healthcheck",
    "network_config",
    "pool_network_config",
    "port_key",
    "resource_settings",
    "restart_policy",
    "spec_hash",
    "volume_config",
    "volume_labels",
    "volume_type",
]
