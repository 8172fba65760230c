"""Host ports as a node resource: which (hostPort, protocol, hostIP) each node has taken, kept incrementally.

A project's requested host ports (`spec.services[].ports[]` with a `hostPort`) are taken on a node by

* the projects bound there (Scheduled, Running, Terminating: their containers hold, or are about to hold, the
  ports),
* the projects assumed bound there by this scheduler (a burst of decisions never doubles a port), and
* the old copy of a project moved off the node with a hand-off (`status.previousNodeRef` with a
  `handoffDeadline`): its containers keep running, ports included, until the project runs elsewhere (which
  clears `previousNodeRef`) or the deadline passes. A move that ended with final backups (`finish_move`) has no
  deadline: its services were stopped, nothing is held.

Guarantees:

* **Docker's rule.** Two ports conflict when protocol and port are equal and their host addresses overlap: equal,
  or either one is a wildcard (empty, `0.0.0.0`, `::`).
* **A project never conflicts with itself** (its own old copy on the node it left, or its own assumption).
* **Flat cost.** `PortIndex` is filed by (protocol, port); a check costs one lookup per requested port (and one
  per address bound on that port), whatever the number of projects or nodes. Holds change only on informer
  events and assumptions (`ClusterState`), never by a scan.
* **Time-bounded holds** carry their deadline; the check compares it with the decision's `now`, so an expired
  hand-off stops counting without an event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from caravanserai import v1
from caravanserai.clock import seconds

TCP = "TCP"
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    """One published port on a node: `port` of `protocol` ("TCP", "UDP") on `host_ip` ("" for every address)."""

    port: int
    protocol: str = TCP
    host_ip: str = ""

    def __str__(self) -> str:
        where = f"{self.host_ip}:" if self.host_ip not in WILDCARDS else ""
        return f"{where}{self.port}/{self.protocol}"


HostPorts = tuple[HostPort, ...]


def host_ports(spec: v1.ProjectSpec) -> HostPorts:
    """The host ports the services of `spec` publish, sorted, without duplicates. A service on the host's network
    (networkMode host) takes each of its container ports on the host itself, on every address."""
    found = {
        HostPort(port.container_port, (port.protocol or TCP).upper(), "")
        if service.network_mode == v1.NETWORK_MODE_HOST
        else HostPort(port.host_port, (port.protocol or TCP).upper(), port.host_ip)
        for service in spec.services
        for port in service.ports
        if port.host_port > 0 or service.network_mode == v1.NETWORK_MODE_HOST
    }
    return tuple(sorted(found))


@dataclass(frozen=True, slots=True)
class Hold:
    """Ports held on one node by one project; `until` (seconds since the epoch) for a hand-off's old copy, None
    while bound or assumed there."""

    node: str
    ports: HostPorts
    until: float | None = None


def holds_of(project: v1.Project, ports: HostPorts) -> tuple[Hold, ...]:
    """Where `project` (publishing `ports`) holds them as its status says: its node while bound, and the node it
    left while a hand-off keeps the old containers there."""
    if not ports:
        return ()
    status = project.status
    holds: list[Hold] = []
    if status.phase in v1.BOUND_PHASES and status.node_ref:
        holds.append(Hold(status.node_ref, ports))
    left = status.previous_node_ref
    if left and left != status.node_ref and status.HasField("handoff_deadline"):
        holds.append(Hold(left, ports, seconds(status.handoff_deadline)))
    return tuple(holds)


@dataclass(slots=True)
class PortIndex:
    """The host ports taken on one node: (protocol, port) → host address → holder → deadline (None: none).

    A holder is a project name; `assumed` holds are filed apart (`tag`) so that the informer's view and this
    scheduler's assumption of one project never remove each other."""

    _taken: dict[tuple[str, int], dict[str, dict[tuple[str, str], float | None]]] = field(default_factory=dict)
    ignoring: frozenset[str] = frozenset()  # holders a what-if view treats as gone (`without`)

    def add(self, holder: str, ports: HostPorts, *, until: float | None = None, tag: str = "") -> None:
        for port in ports:
            self._taken.setdefault((port.protocol, port.port), {}).setdefault(port.host_ip, {})[(holder, tag)] = until

    def remove(self, holder: str, ports: HostPorts, *, tag: str = "") -> None:
        for port in ports:
            by_ip = self._taken.get((port.protocol, port.port))
            if by_ip is None:
                continue
            holders = by_ip.get(port.host_ip)
            if holders is not None:
                holders.pop((holder, tag), None)
                if not holders:
                    del by_ip[port.host_ip]
            if not by_ip:
                del self._taken[(port.protocol, port.port)]

    def without(self, holders: frozenset[str]) -> PortIndex:
        """A read-only view of this index in which `holders` hold nothing (preemption's what-if); it shares the
        live entries, so it is valid only until the next change."""
        return PortIndex(self._taken, self.ignoring | holders)

    def conflict(self, project: str, ports: HostPorts, *, now: float) -> HostPort | None:
        """The first of `ports` another project holds here at `now` (None: all free)."""
        ignoring = self.ignoring
        for port in ports:
            by_ip = self._taken.get((port.protocol, port.port))
            if not by_ip:
                continue
            for ip, holders in by_ip.items():
                if not _overlap(ip, port.host_ip):
                    continue
                for (holder, _), until in holders.items():
                    if holder != project and (until is None or now < until) and holder not in ignoring:
                        return port
        return None

    def __bool__(self) -> bool:
        return bool(self._taken)


def _overlap(a: str, b: str) -> bool:
    return a == b or a in WILDCARDS or b in WILDCARDS


__all__ = ["HostPort", "HostPorts", "Hold", "PortIndex", "TCP", "WILDCARDS", "holds_of", "host_ports"]
