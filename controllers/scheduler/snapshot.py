"""What the scheduler knows about a node and about a project, as plain Python values.

Filters and scores (`filters.py`, `scores.py`) are pure functions over these records, so they are tested with
tables and never parse a quantity or walk a protobuf message while deciding.

* `NodeInfo` is the scheduler's live view of one node. `ClusterState` (`cache.py`) owns the records and updates
  them in place from informer events between decisions; a decision runs without awaiting, so it always sees one
  consistent state. Everyone else reads them.
* `ProjectInfo` is immutable: taken from a project when it is about to be scheduled, with what a start of it
  fetches and uploads (`needs`, `caravanserai.project.moveneeds`) and its images' sizes resolved then.

`NodeInfo` is a `movecost.NodeSupply`: the start-delay and RPO scores cost a node with the library's functions.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from caravanserai import meta, v1
from caravanserai.clock import seconds
from caravanserai.controllers.scheduler.nominated import NominatedRoom
from caravanserai.controllers.scheduler.ports import HostPorts, PortIndex, host_ports
from caravanserai.controllers.scheduler.resources import Resources, ordered, parse_resources, project_requests
from caravanserai.project import runoptions
from caravanserai.project.affinity import NO_PLACEMENT, Placement, labels_of, placement_of
from caravanserai.project.movecost import NO_NEEDS, MoveNeeds, no_rates
from caravanserai.project.moveneeds import NO_SIZES, move_needs, parse_rate, restore_rates
from caravanserai.project.tolerations import matches

if TYPE_CHECKING:  # filterbase imports this module; the memo only names its type
    from caravanserai.controllers.scheduler.filterbase import Rejection

Memo = tuple[int, "Rejection | None", "Rejection | float"]
"""What a search remembers of a node for one kind of project: (`NodeInfo.version` then, the rejection of the
node's static checks or None, then the node's unschedulable rejection or its base score; `nodegate.py`)."""

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EXISTS = "Exists"
EQUAL = "Equal"


@dataclass(frozen=True, slots=True)
class TaintInfo:
    """A node taint: key, value and effect (NoSchedule, PreferNoSchedule or NoExecute)."""

    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class TolerationInfo:
    """A project toleration. `operator` is Equal (default) or Exists; an empty key with Exists matches every
    taint; an empty effect matches every effect."""

    key: str = ""
    operator: str = EQUAL
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: TaintInfo) -> bool:
        """Whether this toleration matches `taint` (Kubernetes' rules, `caravanserai.project.tolerations`)."""
        return matches(self.key, self.operator, self.value, self.effect, taint.key, taint.value, taint.effect)


@dataclass(slots=True)
class NodeInfo:
    """The scheduler's view of one node. `requested` is the sum of the requests of the projects bound to it
    (phases Scheduled, Running, Terminating) plus those assumed bound by this scheduler; `renew_time` is the last
    renewal of its Lease (None: no Lease); `download` and `upload` its measured throughput in bytes/s (None:
    unmeasured), `restore_rates` the download rates its restores observed per BackupRepository, `images` the
    normalised names of the images it holds (`moveneeds.image_key`), `allowed_host_paths` the host paths its agent
    lets HostPath volumes mount (empty: any), `ports` the host ports taken on it (bound, assumed, and hand-offs' old
    copies; `ports.py`), `nominated` the room kept for projects nominated to it after preempting others there
    (`nominated.py`); `name_hash` is `name_hash(name)`, worked out once (it orders nodes of equal score).

    `version` counts the changes `ClusterState` made to the record (-1: a record it does not keep, such as a what-if
    view or a test's); `memo` holds, per kind of project, what a search worked out about the node at a version
    (`nodegate.py`): valid only while `version` is unchanged, and never kept for a record of version -1."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[TaintInfo, ...] = ()
    allocatable: Resources = field(default_factory=dict)
    requested: Resources = field(default_factory=dict)
    renew_time: float | None = None
    download: float | None = None
    upload: float | None = None
    restore_rates: Mapping[str, float] = field(default_factory=no_rates)
    images: frozenset[str] = frozenset()
    allowed_host_paths: tuple[str, ...] = ()  # the agent's --allowed-host-paths (empty: any path)
    ports: PortIndex = field(default_factory=PortIndex)
    nominated: NominatedRoom = field(default_factory=NominatedRoom)
    name_hash: int = field(init=False, repr=False, compare=False)
    version: int = field(default=-1, init=False, repr=False, compare=False)
    memo: dict[int, Memo] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.name_hash = name_hash(self.name)

    def free(self, resource: str) -> int:
        """Allocatable minus requested for `resource` (negative when overcommitted by others)."""
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)


@dataclass(frozen=True, slots=True)
class ProjectInfo:
    """What scheduling needs of a project: its summed requests, labels, placement rules, priority and move
    needs."""

    name: str
    requests: Resources = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[TolerationInfo, ...] = ()
    priority: int = 0
    needs: MoveNeeds = NO_NEEDS
    uid: str = ""
    resource_version: str = ""
    leaving: str = ""  # the node a move took it off: another feasible node wins over it
    host_paths: tuple[str, ...] = ()  # of its HostPath volumes
    host_ports: HostPorts = ()  # the (hostPort, protocol, hostIP) its services publish
    labels: Mapping[str, str] = field(default_factory=dict)
    placement: Placement = NO_PLACEMENT  # node affinity, project (anti-)affinity, spread constraints
    preemption_policy: str = ""  # PreemptLowerPriority (empty) or Never
    created: float = 0.0  # creation time, seconds since the epoch
    ordered_requests: tuple[tuple[str, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The requests in reporting order (cpu, memory, the others by name), computed once per decision.
        ordered_items = tuple((name, self.requests[name]) for name in ordered(self.requests))
        object.__setattr__(self, "ordered_requests", ordered_items)


shown = meta.shown
"""A project's key as messages show it (`meta.shown`)."""


@functools.lru_cache(maxsize=65536)
def name_hash(name: str) -> int:
    """A stable 64-bit hash of a name (the same in every process and run, unlike `hash`)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")


def node_spec_fields(node: v1.Node) -> tuple[dict[str, str], bool, tuple[TaintInfo, ...], Resources]:
    """The fields of a Node that decide where projects fit: labels, unschedulable, taints and allocatable."""
    taints = tuple(TaintInfo(t.key, t.value, t.effect or NO_SCHEDULE) for t in node.spec.taints)
    return dict(node.metadata.labels), node.spec.unschedulable, taints, parse_resources(node.status.allocatable)


def node_rates(node: v1.Node) -> tuple[float | None, float | None, Mapping[str, float]]:
    """The node's measured download and upload rates in bytes/s (None when unmeasured or unreadable) and its
    observed restore rates per repository."""
    throughput = node.status.network.throughput
    return parse_rate(throughput.download), parse_rate(throughput.upload), restore_rates(node)


def lease_renew_time(lease: v1.Lease) -> float | None:
    """When the Lease was last renewed (seconds since the epoch), or None if it never was."""
    if not lease.spec.HasField("renew_time"):
        return None
    return seconds(lease.spec.renew_time)


def project_info(project: v1.Project, image_sizes: Mapping[str, int] = NO_SIZES) -> ProjectInfo:
    """The scheduling view of `project`; `image_sizes` (normalised image name → bytes) sizes its images."""
    tolerations = tuple(TolerationInfo(t.key, t.operator or EQUAL, t.value, t.effect) for t in project.spec.tolerations)
    return ProjectInfo(
        name=meta.key_of(project),
        requests=project_requests(project),
        node_selector=dict(project.spec.node_selector),
        tolerations=tolerations,
        priority=project.spec.priority,
        needs=move_needs(project, image_sizes),
        uid=project.metadata.uid,
        resource_version=project.metadata.resource_version,
        leaving=project.status.previous_node_ref,
        host_paths=tuple(runoptions.host_paths(project.spec)),
        host_ports=host_ports(project.spec),
        labels=labels_of(project.metadata.labels, project.metadata.namespace),
        placement=placement_of(project.spec, project.metadata.namespace),
        preemption_policy=project.spec.preemption_policy,
        created=seconds(project.metadata.creation_timestamp),
    )


__all__ = [
    "EQUAL",
    "EXISTS",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "NodeInfo",
    "PREFER_NO_SCHEDULE",
    "ProjectInfo",
    "TaintInfo",
    "TolerationInfo",
    "Memo",
    "lease_renew_time",
    "name_hash",
    "node_rates",
    "node_spec_fields",
    "project_info",
    "shown",
]
