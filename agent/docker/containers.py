"""A project's services as Docker Engine API (1.41) create configurations. Pure functions, no I/O.

Guarantees:

* **Deterministic.** The same project, service and node always give the same configuration and the same
  `spec_hash`, so a restarted agent recognises the containers it made.
* **Typed, with one writer of the body.** A service's container is a frozen `ContainerCreate` record
  (`container_create`); its `body()` is the one place that writes Docker's create body (`container_config`).
* **Kubernetes semantics for the command line.** `command` replaces the image's ENTRYPOINT and `args` its CMD;
  with `command` set and no `args`, the image's CMD is not used (Docker drops it when Entrypoint is given).
* **Restart policies**: Always (the default) → Docker `always`; OnFailure → `on-failure` (unlimited retries);
  Never → `no`.
* **Resources**: limits are enforced (`cpu` → NanoCpus, `memory` → Memory); requests become soft reservations
  (`cpu` → CpuShares relative to 1024 per core, `memory` → MemoryReservation). `nvidia.com/gpu` becomes a Docker
  device request for that many GPUs (driver nvidia); other extended resources (such as `gpu`) are counted by the
  scheduler and told to the container.
* **Grants**: after the service's own environment come the variables of `caravanserai.project.grants` (node, project,
  service, the cpu/memory requests and limits, `CARA_RESOURCE_<NAME>` per extended resource).
* **Inputs**: what a service takes from Secrets and Configs (`ServiceInputs`: its resolved environment, the host
  directories of its data volumes, the digest of the data it read) is part of the configuration, and the digest
  is part of the spec hash: a change of a Secret or Config recreates exactly the services that read it.
* **Health**: an `exec` healthcheck becomes Docker's HEALTHCHECK (`CMD` form, interval, timeout, retries and
  start period in nanoseconds); http and tcp checks are run by the agent itself (`agent/workload/health.py`).
* **Networking**: every container joins the project network with its service name as DNS alias; ports with a
  host port are published on the node, the others only exposed on the project network. A service with network
  mode host joins no project network and maps no port (it listens on the node's own ports).
* **Run options** (user, capabilities, devices, tmpfs, stop signal and grace period, ulimits, labels …) are
  `runsettings.RunSettings`; a service's labels are the container's, under ours (ours win). HostPath volumes are
  bind mounts (`Binds`: a missing host directory is made empty, as Compose and `docker run -v` do), and their host
  paths are part of the spec hash of the services that mount them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from caravanserai import v1
from caravanserai.agent.docker import naming
from caravanserai.agent.docker.runsettings import NO_SETTINGS, Healthcheck, RunSettings
from caravanserai.project import grants, runoptions
from caravanserai.project.registryauth import RegistryCredential
from caravanserai.text.quantity import cpu_millis, to_int

RESTART_ALWAYS = "Always"
RESTART_ON_FAILURE = "OnFailure"
RESTART_NEVER = "Never"

DOCKER_RESTART_POLICIES = {RESTART_ALWAYS: "always", RESTART_ON_FAILURE: "on-failure", RESTART_NEVER: "no"}

VOLUME_EPHEMERAL = v1.VOLUME_EPHEMERAL
VOLUME_PERSISTENT = v1.VOLUME_PERSISTENT
DOCKER_VOLUME_TYPES = (VOLUME_EPHEMERAL, VOLUME_PERSISTENT)
NVIDIA_GPU = "nvidia.com/gpu"
HOST_NETWORK = "host"

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


def spec_hash(service: v1.Service, digest: str = "", *, binds: tuple[str, ...] = ()) -> str:
    """A short stable hash of everything in a service's spec, of the data it reads (`digest`, see
    `ServiceInputs`) and of the host paths it bind-mounts (`binds`, see `host_binds`); it changes exactly when one
    of them does.

    Computed over the protobuf JSON mapping with sorted keys, which does not depend on serialization details.
    """
    document = json_format.MessageToDict(service, preserving_proto_field_name=True)
    if digest:
        document["_data"] = digest
    if binds:
        document["_binds"] = list(binds)
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def container_labels(project: v1.Project, service: v1.Service, *, node: str, digest: str = "") -> dict[str, str]:
    """Labels of a service's container: owner labels plus service, generation, spec hash and (when the service
    sets a grace period) the stop timeout the agent's stops use."""
    labels = naming.owner_labels(node=node, project=naming.key_of(project), project_uid=project.metadata.uid)
    labels[naming.LABEL_SERVICE] = service.name
    labels[naming.LABEL_GENERATION] = str(project.metadata.generation)
    labels[naming.LABEL_SPEC_HASH] = service_hash(project, service, digest)
    grace = runoptions.stop_grace_seconds(service)
    if grace is not None:
        labels[naming.LABEL_STOP_TIMEOUT] = str(grace)
    return labels


def service_hash(project: v1.Project, service: v1.Service, digest: str = "") -> str:
    """The spec hash of `service` of `project` with the data it reads (`digest`) and the host paths it mounts."""
    return spec_hash(service, digest, binds=host_binds(project, service))


def host_binds(project: v1.Project, service: v1.Service) -> tuple[str, ...]:
    """Docker's `Binds` for the HostPath volumes `service` mounts: `host:container` or `host:container:ro`."""
    host_paths = {v.name: v.host_path for v in project.spec.volumes if v.type == v1.VOLUME_HOST_PATH}
    return tuple(
        f"{host_paths[m.name]}:{m.mount_path}{':ro' if m.read_only else ''}"
        for m in service.volume_mounts
        if m.name in host_paths
    )


def volume_labels(project: v1.Project, volume: v1.Volume, *, node: str) -> dict[str, str]:
    """Labels of a project volume: owner labels plus the volume's name and type."""
    labels = naming.owner_labels(node=node, project=naming.key_of(project), project_uid=project.metadata.uid)
    labels[naming.LABEL_VOLUME] = volume.name
    labels[naming.LABEL_VOLUME_TYPE] = volume_type(volume)
    return labels


def network_config(project: v1.Project, *, node: str) -> dict[str, Any]:
    """The create configuration of the project's bridge network."""
    return {
        "Name": naming.network_name(naming.key_of(project), node),
        "Driver": "bridge",
        "CheckDuplicate": True,
        "Labels": naming.owner_labels(node=node, project=naming.key_of(project), project_uid=project.metadata.uid),
    }


def pool_network_config(name: str, *, node: str) -> dict[str, Any]:
    """The create configuration of a spare bridge network of `node`'s pool (`netpool`): no project label."""
    return {"Name": name, "Driver": "bridge", "CheckDuplicate": True, "Labels": naming.pool_labels(node)}


def volume_config(project: v1.Project, volume: v1.Volume, *, node: str, epoch: str = "") -> dict[str, Any]:
    """The create configuration of a project volume (local driver); `epoch` labels a Persistent volume's copy."""
    labels = volume_labels(project, volume, node=node)
    if epoch:
        labels[naming.LABEL_EPOCH] = epoch
    return {"Name": naming.volume_name(naming.key_of(project), volume.name, node), "Driver": "local", "Labels": labels}


def port_key(port: v1.ServicePort) -> str:
    """Docker's port key, e.g. `8080/tcp`."""
    return f"{port.container_port}/{(port.protocol or 'TCP').lower()}"


@dataclass(frozen=True, slots=True)
class Port:
    """A container port: Docker's key (`8080/tcp`), and where it is published on the node (`host_port` 0: only
    exposed on the project network)."""

    key: str
    host_ip: str = ""
    host_port: int = 0

    @staticmethod
    def of(port: v1.ServicePort) -> Port:
        return Port(port_key(port), port.host_ip, port.host_port)


@dataclass(frozen=True, slots=True)
class Mount:
    """A mount of a container: a Docker volume (`volume`) or a host directory (`bind`)."""

    type: str
    source: str
    target: str
    read_only: bool

    def body(self) -> dict[str, Any]:
        return {"Type": self.type, "Source": self.source, "Target": self.target, "ReadOnly": self.read_only}


@dataclass(frozen=True, slots=True)
class ContainerCreate:
    """Everything the agent sets when it creates a service's container; `body()` is the one place that writes
    it as the Engine API body of `POST /containers/create` (fields left empty are left out of it).

    `hostname` is also the container's DNS alias on `network`; `restart_policy` is Docker's name for it
    (`always`, `on-failure`, `no`); `resources` are HostConfig's resource fields (see `resource_settings`);
    `gpus` is the number of NVIDIA GPUs requested from Docker (0: no device request)."""

    image: str
    hostname: str
    env: tuple[str, ...]
    labels: Mapping[str, str]
    network: str
    restart_policy: str
    resources: Mapping[str, int] = field(default_factory=dict)
    ports: tuple[Port, ...] = ()
    mounts: tuple[Mount, ...] = ()
    gpus: int = 0
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    working_dir: str = ""
    healthcheck: Healthcheck | None = None
    binds: tuple[str, ...] = ()
    run: RunSettings = NO_SETTINGS

    def body(self) -> dict[str, Any]:
        """The Engine API (1.41) body; its keys, their order and their values are what adoption relies on."""
        body: dict[str, Any] = {
            "Image": self.image,
            "Hostname": self.hostname,
            "Env": list(self.env),
            "Labels": {**dict(self.run.labels), **self.labels},
            "HostConfig": self._host_config(),
        }
        if not self.run.host_network:
            body["NetworkingConfig"] = {"EndpointsConfig": {self.network: {"Aliases": [self.hostname]}}}
        optional: dict[str, Any] = {
            "Entrypoint": list(self.entrypoint),
            "Cmd": list(self.cmd),
            "ExposedPorts": {port.key: {} for port in self.ports},
            "WorkingDir": self.working_dir,
            "Healthcheck": self.healthcheck.body() if self.healthcheck is not None else None,
            **self.run.config(),
        }
        body.update((key, value) for key, value in optional.items() if value or key == "StopTimeout")
        return body

    def _host_config(self) -> dict[str, Any]:
        host_config: dict[str, Any] = {
            "NetworkMode": HOST_NETWORK if self.run.host_network else self.network,
            "RestartPolicy": {"Name": self.restart_policy, "MaximumRetryCount": 0},
            **self.resources,
        }
        bindings: dict[str, list[dict[str, str]]] = {}
        for port in self.ports:
            if port.host_port and not self.run.host_network:
                bindings.setdefault(port.key, []).append({"HostIp": port.host_ip, "HostPort": str(port.host_port)})
        gpus = {"Driver": "nvidia", "Count": self.gpus, "Capabilities": [["gpu"]]}
        optional: dict[str, Any] = {
            "PortBindings": bindings,
            "Binds": list(self.binds),
            "Mounts": [mount.body() for mount in self.mounts],
            "DeviceRequests": [gpus] if self.gpus else [],
            **self.run.host_config(),
        }
        host_config.update((key, value) for key, value in optional.items() if value)
        return host_config


def _mounts(project: v1.Project, service: v1.Service, node: str, inputs: ServiceInputs) -> tuple[Mount, ...]:
    docker_volumes = {v.name for v in project.spec.volumes if volume_type(v) in DOCKER_VOLUME_TYPES}
    volumes = (
        Mount("volume", naming.volume_name(naming.key_of(project), mount.name, node), mount.mount_path, mount.read_only)
        for mount in service.volume_mounts
        if mount.name in docker_volumes
    )
    return (*volumes, *(Mount("bind", source, target, True) for source, target in inputs.mounts))


def gpu_count(resources: v1.ResourceRequirements) -> int:
    """How many NVIDIA GPUs (`nvidia.com/gpu`) a service is granted: Docker's device request for them."""
    return grants.extended(resources).get(NVIDIA_GPU, 0)


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


def container_create(
    project: v1.Project,
    service: v1.Service,
    *,
    node: str,
    inputs: ServiceInputs | None = None,
    network: str = "",
) -> ContainerCreate:
    """The container of one service of `project`, run by the agent of `node`, with the `inputs` it takes from
    Secrets and Configs (none: its literal environment), on the project's `network` (by default
    `cara_<project>_<node>`; the agent's network pool may give it another, see `netpool`)."""
    inputs = inputs or ServiceInputs.literal(service)
    metadata = project.metadata
    granted = grants.environment(service, node=node, project=metadata.name, namespace=metadata.namespace)
    return ContainerCreate(
        image=service.image,
        hostname=service.name,
        env=(*inputs.env, *(f"{name}={value}" for name, value in granted.items())),
        labels=container_labels(project, service, node=node, digest=inputs.digest),
        network=network or naming.network_name(naming.key_of(project), node),
        restart_policy=DOCKER_RESTART_POLICIES[restart_policy(service)],
        resources=resource_settings(service.resources),
        ports=tuple(Port.of(port) for port in service.ports),
        mounts=_mounts(project, service, node, inputs),
        gpus=gpu_count(service.resources),
        entrypoint=tuple(service.command),
        cmd=tuple(service.args),
        working_dir=service.working_dir,
        healthcheck=Healthcheck.of(service.healthcheck) if service.HasField("healthcheck") else None,
        binds=host_binds(project, service),
        run=RunSettings.of(service),
    )


def container_config(
    project: v1.Project,
    service: v1.Service,
    *,
    node: str,
    inputs: ServiceInputs | None = None,
    network: str = "",
) -> dict[str, Any]:
    """The body of `POST /containers/create` for one service of `project` (see `container_create`)."""
    return container_create(project, service, node=node, inputs=inputs, network=network).body()


__all__ = [
    "ContainerCreate",
    "DOCKER_RESTART_POLICIES",
    "DOCKER_VOLUME_TYPES",
    "HOST_NETWORK",
    "Healthcheck",
    "Mount",
    "NO_INPUTS",
    "NVIDIA_GPU",
    "Port",
    "ProjectInputs",
    "RESTART_ALWAYS",
    "RESTART_NEVER",
    "RESTART_ON_FAILURE",
    "ServiceInputs",
    "VOLUME_EPHEMERAL",
    "VOLUME_PERSISTENT",
    "container_config",
    "container_create",
    "container_labels",
    "gpu_count",
    "host_binds",
    "network_config",
    "pool_network_config",
    "port_key",
    "resource_settings",
    "restart_policy",
    "service_hash",
    "spec_hash",
    "volume_config",
    "volume_labels",
    "volume_type",
]
