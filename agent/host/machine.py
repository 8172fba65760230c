"""Facts about the machine an agent runs on: capacity, allocatable resources, node info and addresses.

Reading functions take their paths as arguments (tests pass fixtures) and return None for what cannot be read;
the pure functions build the Node status fields from what was read.

* **Capacity**: cpu = logical cores × 1000 millicores; memory = MemTotal of /proc/meminfo (Docker's MemTotal
  when unreadable); disk = size of the file system holding Docker's data root (DockerRootDir).
* **Extended resources** (`extended.node_resources`: `--resource NAME=COUNT`, GPUs from nvidia-smi) are whole
  counts in both capacity and allocatable (nothing is reserved of them).
* **Allocatable** = capacity − reserved (cpu and memory), never below zero; disk is not reserved.
* **Quantities** are exact: cpu as "4" or "3500m", bytes in the largest binary unit dividing them.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from caravanserai import v1
from caravanserai.agent.docker.records import DaemonInfo
from caravanserai.agent.host.extended import node_resources
from caravanserai.client.targets import DEFAULT_PORT
from caravanserai.text.addresses import parse_address
from caravanserai.text.quantity import cpu_millis, format_cpu, format_quantity, to_int

ADDRESS_INTERNAL_IP = "InternalIP"
ADDRESS_HOSTNAME = "Hostname"


@dataclass(frozen=True, slots=True)
class Capacity:
    """Whole-machine resources: cpu in millicores, memory and disk in bytes (None: unknown)."""

    cpu_millis: int
    memory_bytes: int
    disk_bytes: int | None = None
    extended: tuple[tuple[str, int], ...] = ()  # (name, count) of extended resources, sorted


def read_meminfo_total(path: str = "/proc/meminfo") -> int | None:
    """MemTotal in bytes from a meminfo file, or None."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    parts = line.split()
                    unit = parts[2].lower() if len(parts) > 2 else "b"
                    return int(parts[1]) * (1024 if unit == "kb" else 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def read_os_image(path: str = "/etc/os-release") -> str:
    """PRETTY_NAME of an os-release file (NAME as a fallback), or "" when unreadable."""
    values: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.strip().partition("=")
                if sep:
                    values[key] = value.strip().strip('"').strip("'")
    except OSError:
        return ""
    return values.get("PRETTY_NAME") or values.get("NAME", "")


def disk_size(path: str) -> int | None:
    """Total size in bytes of the file system holding `path`, or None when it cannot be examined."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_blocks * stats.f_frsize


def machine_capacity(docker_info: DaemonInfo, *, meminfo: str = "/proc/meminfo") -> Capacity:
    """The machine's capacity: local cores and memory (Docker's figures when local ones are missing) and the
    size of Docker's data root."""
    cores = os.cpu_count() or docker_info.cpus
    memory = read_meminfo_total(meminfo) or docker_info.memory_bytes
    root = docker_info.root_dir
    disk = disk_size(root) if root else None
    return Capacity(cpu_millis=cores * 1000, memory_bytes=memory, disk_bytes=disk)


def _bytes(n: int) -> str:
    return format_quantity(n, binary=True)


def capacity_quantities(capacity: Capacity) -> dict[str, str]:
    """Capacity as the quantity map of `NodeStatus.capacity`."""
    out = {"cpu": format_cpu(capacity.cpu_millis), "memory": _bytes(capacity.memory_bytes)}
    if capacity.disk_bytes is not None:
        out["disk"] = _bytes(capacity.disk_bytes)
    out.update((name, str(count)) for name, count in capacity.extended)
    return out


def allocatable_quantities(capacity: Capacity, *, reserved_cpu: str, reserved_memory: str) -> dict[str, str]:
    """Capacity minus the reservation for the system, clamped at zero, as `NodeStatus.allocatable`."""
    reduced = Capacity(
        cpu_millis=max(0, capacity.cpu_millis - cpu_millis(reserved_cpu)),
        memory_bytes=max(0, capacity.memory_bytes - to_int(reserved_memory)),
        disk_bytes=capacity.disk_bytes,
        extended=capacity.extended,
    )
    return capacity_quantities(reduced)


def agent_version() -> str:
    """The installed caravanserai distribution's version ("unknown" when not installed)."""
    try:
        return importlib.metadata.version("caravanserai")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def node_info(docker_info: DaemonInfo, *, os_release: str = "/etc/os-release") -> v1.NodeInfo:
    """Machine and software facts for `NodeStatus.node_info`."""
    uname = platform.uname()
    return v1.NodeInfo(
        os_image=read_os_image(os_release) or docker_info.operating_system,
        kernel_version=uname.release,
        architecture=uname.machine,
        docker_version=docker_info.server_version,
        agent_version=agent_version(),
        operating_system=uname.system.lower(),
    )


def split_host_port(address: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """("host", port) of "host:port", "[v6]:port" or a bare host; ValueError when it is none of them."""
    return parse_address(address, flag="server", default_port=default_port)


def route_address(server: str) -> str | None:
    """The local IP address the kernel would use to reach `server` (host:port, or the first of a comma-separated
    list); None when unroutable.

    Connecting a UDP socket sends nothing; it only selects the route and source address.
    """
    host, port = split_host_port(server.split(",")[0].strip())
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except OSError:
        return None
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.connect(sockaddr)
                return str(sock.getsockname()[0])
        except OSError:
            continue
    return None


@dataclass(frozen=True, slots=True)
class MachineFacts:
    """Everything registration reports about the machine."""

    capacity: Capacity
    node_info: v1.NodeInfo
    addresses: tuple[v1.NodeAddress, ...]


def gather_facts(
    docker_info: DaemonInfo,
    *,
    server: str,
    hostname: str,
    advertise: str = "",
    resources: Mapping[str, int] | None = None,
) -> MachineFacts:
    """Read the machine's facts (`resources`: the declared extended resources). Blocking (files, statvfs, name
    resolution, nvidia-smi): run it in a thread."""
    extended = tuple(sorted(node_resources(resources or {}).items()))
    return MachineFacts(
        capacity=dataclasses.replace(machine_capacity(docker_info), extended=extended),
        node_info=node_info(docker_info),
        addresses=tuple(node_addresses(server, hostname=hostname, advertise=advertise)),
    )


def hostname_address(hostname: str) -> str | None:
    """The first address the host name resolves to, or None."""
    try:
        return socket.gethostbyname(hostname)
    except OSError:
        return None


def node_addresses(server: str, *, hostname: str, advertise: str = "") -> list[v1.NodeAddress]:
    """InternalIP (the advertised address, else the one used to reach the API server, else the host name's
    address) and Hostname."""
    ip = advertise or route_address(server) or hostname_address(hostname)
    addresses = []
    if ip:
        addresses.append(v1.NodeAddress(type=ADDRESS_INTERNAL_IP, address=ip))
    addresses.append(v1.NodeAddress(type=ADDRESS_HOSTNAME, address=hostname))
    return addresses


__all__ = [
    "ADDRESS_HOSTNAME",
    "ADDRESS_INTERNAL_IP",
    "Capacity",
    "MachineFacts",
    "agent_version",
    "allocatable_quantities",
    "capacity_quantities",
    "disk_size",
    "gather_facts",
    "hostname_address",
    "machine_capacity",
    "node_addresses",
    "node_info",
    "read_meminfo_total",
    "read_os_image",
    "route_address",
    "split_host_port",
]
