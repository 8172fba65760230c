"""Room held on a node for nominated projects: Pending projects that preempted lower-priority ones there.

A project that can only fit on a node after evicting others is *nominated* to it (`status.nominatedNodeName`,
kube-scheduler's nominatedNodeName): the victims leave, and until the project is bound the room they free is kept
for it. `NominatedRoom` is that reservation for one node, read by the resource and host-port filters.

Guarantees:

* **Lower or equal priority keeps off.** A nominated project's requests and host ports count against every other
  project of lower or equal priority deciding on that node (`reserved`, `port_conflict`); a project of higher
  priority does not see them (it may take the room, as in Kubernetes), nor does the nominee itself.
* **Cheap when empty.** Nodes without nominations (nearly all) cost one truth test (of a dict: no Python call,
  it runs for every node searched); with some, a check walks only that node's nominees.
* One entry per project: nominating it again (elsewhere, or with a new priority) replaces the entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from caravanserai.controllers.scheduler.ports import HostPorts, PortIndex
from caravanserai.controllers.scheduler.resources import Resources, add_into


@dataclass(frozen=True, slots=True)
class Nominee:
    """A project nominated to a node: its priority, summed requests and host ports."""

    name: str
    priority: int
    requests: Resources
    ports: HostPorts = ()


class NominatedRoom(dict[str, Nominee]):
    """The nominees of one node, by project name (a dict: false when empty)."""

    __slots__ = ()

    def add(self, nominee: Nominee) -> None:
        self[nominee.name] = nominee

    def remove(self, name: str) -> None:
        self.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self)

    def reserved(self, project: str, priority: int) -> Resources:
        """The requests held here for nominees other than `project` of priority `priority` or higher."""
        total: Resources = {}
        for nominee in self.values():
            if nominee.name != project and nominee.priority >= priority:
                add_into(total, nominee.requests)
        return total

    def port_conflict(self, project: str, priority: int, ports: HostPorts) -> bool:
        """Whether one of `ports` is held here for a nominee other than `project` of priority `priority` or higher
        (Docker's conflict rule, as `PortIndex`)."""
        for nominee in self.values():
            if nominee.name == project or nominee.priority < priority or not nominee.ports:
                continue
            index = PortIndex()
            index.add(nominee.name, nominee.ports)
            if index.conflict(project, ports, now=0.0) is not None:
                return True
        return False


__all__ = ["NominatedRoom", "Nominee"]
