"""The records `ClusterState` (`cache.py`) files: assumed bindings, counted bindings, held host ports, and what an
observed project change means for scheduling."""

from __future__ import annotations

from dataclasses import dataclass

from caravanserai.controllers.scheduler.ports import Hold, HostPorts
from caravanserai.controllers.scheduler.resources import Resources
from caravanserai.controllers.scheduler.topology import Placed
from caravanserai.project.affinity import ProjectTerm


@dataclass(slots=True)
class Assumption:
    """A binding decided and (being) written, not yet shown by the informer."""

    project: str
    node: str
    requests: Resources
    resource_version: str  # the project version the decision was made on
    expires_at: float | None = None  # monotonic; set once the bind's outcome is unknown
    ports: HostPorts = ()
    placed: Placed | None = None  # what the topology index files for it while it is assumed


@dataclass(slots=True)
class Held:
    """The host ports a project holds (as the informer shows it), read once per generation."""

    generation: int
    ports: HostPorts
    holds: tuple[Hold, ...]


@dataclass(slots=True)
class Counted:
    """A bound project as the informer shows it: its node, summed requests, generation, labels and required
    anti-affinity terms (read once per generation)."""

    node: str
    requests: Resources
    generation: int
    labels: dict[str, str]
    anti_required: tuple[ProjectTerm, ...]


@dataclass(frozen=True, slots=True)
class ProjectChange:
    """What an observed project change means for scheduling: resources, host ports or nominated room were released
    on the nodes `freed_on` (other Pending projects may fit there now), a placed project's required anti-affinity
    stopped counting or moved (`anti_moved`: projects it kept off a domain may fit anywhere there now), and/or an
    assumption ended with the project still Pending (retry it)."""

    freed_on: frozenset[str] = frozenset()
    anti_moved: bool = False
    retry: bool = False

    @property
    def freed(self) -> bool:
        """Whether room was released on some node."""
        return bool(self.freed_on)


__all__ = ["Assumption", "Counted", "Held", "ProjectChange"]
