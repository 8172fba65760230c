"""ClusterState: the scheduler's incremental view of nodes, their Leases and what is bound to them, plus the
"assumed" ledger of bindings this scheduler made that its informers have not shown yet.

Guarantees:

* **Incremental.** Each informer event changes only the records it concerns: a project's requests are added to
  or taken from its node's `requested` sum when it enters or leaves a bound phase (Scheduled, Running,
  Terminating); nothing re-sums all projects. Requests are parsed once per project generation.
* **Assumed bindings count at once.** `assume` adds a project's requests to the chosen node before the bind is
  even sent, so a burst of decisions can never overcommit a node while the informer catches up.
* **The informer takes over exactly.** An assumption records the project version the decision was made on. The
  first change the informer shows *from* that version (the bind itself, or whatever write beat it) ends the
  assumption: from then on the informer's state alone counts (bound → counted as bound; still Pending → not
  counted, and the caller retries it). Versions are only compared for equality; they stay opaque.
* **Failures end assumptions.** `forget` drops one at once (a definitive refusal); `expire_later` keeps it for
  `ttl` seconds when the bind's outcome is unknown (timeout, cancelled), then `expired` hands it back.
* **Host ports are indexed per node** (`ports.py`) the same way: a project's holds (its node while bound or
  assumed, the node it left while a hand-off keeps its old copy there) are filed when it changes, taken back when
  they change or it goes; its ports are read once per generation.
* **Node images are indexed once per node change** (`images.py`): each NodeInfo keeps the set of its image
  names, `image_sizes` the size of every name any node holds; a decision only looks its project's images up.
* **Placed projects are indexed by topology** (`topology.py`): a project counts where it is bound (as the
  informer shows it) or else where it is assumed, with its labels and required anti-affinity; filed again when its
  binding, assumption, labels or generation change, taken out when it goes. Node labels are filed with it.
* **Nominations follow the informer** (`nominated.py`): a Pending project with `status.nominatedNodeName` has its
  requests and host ports kept on that node for it; binding, leaving Pending, losing the field or deletion ends
  that. The scheduler nominates at once when it decides to preempt (`nominate`), before the write shows.
* **Every change of a node's record counts** (`NodeInfo.version`): an upsert, and every change of what is counted
  on it (bound, assumed, unbound: `_add_requested`, the one place `requested` changes), so that what a search
  remembered about the node at a version (`nodegate.py`) is never read after the node changed. (Its Lease renewal,
  nominations and host ports do not count: a search reads those live.)
* **Node order is stable.** `nodes()` is sorted by name and rebuilt only when nodes come or go; `next_start`
  rotates through it so that sampled searches take turns.

The state is changed only by informer handlers and the reconciler, all on one event loop, and a decision reads
it without awaiting, so every decision sees one consistent state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.controllers.scheduler.images import ImageIndex
from caravanserai.controllers.scheduler.nominated import NominatedRoom, Nominee
from caravanserai.controllers.scheduler.ports import PortIndex, holds_of, host_ports
from caravanserai.controllers.scheduler.resources import Resources, add_into, project_requests
from caravanserai.controllers.scheduler.snapshot import (
    NodeInfo,
    ProjectInfo,
    lease_renew_time,
    node_rates,
    node_spec_fields,
)
from caravanserai.controllers.scheduler.staterecords import Assumption, Counted, Held, ProjectChange
from caravanserai.controllers.scheduler.topology import Placed, TopologyIndex
from caravanserai.project.affinity import labels_of, placement_of
from caravanserai.project.moveneeds import node_images

DEFAULT_ASSUME_TTL = 30.0
ASSUMED = "assumed"  # the tag of an assumption's holds in a node's PortIndex


@dataclass(slots=True)
class ClusterState:
    """See the module docstring."""

    _nodes: dict[str, NodeInfo] = field(default_factory=dict)
    _order: list[NodeInfo] | None = None  # nodes sorted by name; None when it must be rebuilt
    # Sum of the requests counted on each node name, shared with its NodeInfo (`requested`). Kept for names
    # without a Node too: a project may be bound to a node the informer has not shown yet.
    _requested: dict[str, Resources] = field(default_factory=dict)
    _renew: dict[str, float | None] = field(default_factory=dict)  # Lease renew time by node name
    _counted: dict[str, Counted] = field(default_factory=dict)  # bound projects as the informer shows them
    _assumed: dict[str, Assumption] = field(default_factory=dict)
    _expiring: dict[str, Assumption] = field(default_factory=dict)  # assumptions with `expires_at` set
    _images: ImageIndex = field(default_factory=ImageIndex)
    # Host ports taken per node name, shared with its NodeInfo (`ports`); kept for names without a Node too.
    _ports: dict[str, PortIndex] = field(default_factory=dict)
    _held: dict[str, Held] = field(default_factory=dict)  # projects holding host ports, as the informer shows them
    topology: TopologyIndex = field(default_factory=TopologyIndex)  # placed projects by domain (`topology.py`)
    # Room kept per node name for nominated projects, shared with its NodeInfo (`nominated`), and each nominee's node.
    _nominated: dict[str, NominatedRoom] = field(default_factory=dict)
    _nominee_node: dict[str, str] = field(default_factory=dict)
    next_start: int = 0

    # ---- nodes ------------------------------------------------------------------------------------------------

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def nodes(self) -> list[NodeInfo]:
        """Every node, sorted by name (the same list object until nodes come or go)."""
        if self._order is None:
            self._order = [self._nodes[name] for name in sorted(self._nodes)]
        return self._order

    def upsert_node(self, node: v1.Node) -> bool:
        """Record a node; True when it is new or a field that decides placement changed (labels, taints,
        unschedulable, allocatable, allowed host paths). Its rates and images, which only score, are recorded
        without waking."""
        name = node.metadata.name
        labels, unschedulable, taints, allocatable = node_spec_fields(node)
        info = self._nodes.get(name)
        if info is None:
            info = NodeInfo(
                name,
                requested=self._requested.setdefault(name, {}),
                renew_time=self._renew.get(name),
                ports=self._ports.setdefault(name, PortIndex()),
                nominated=self._nominated.setdefault(name, NominatedRoom()),
            )
            self._nodes[name] = info
            self._order = None
            changed = True
        else:
            changed = (info.labels, info.unschedulable, info.taints, info.allocatable) != (
                labels,
                unschedulable,
                taints,
                allocatable,
            )
        info.labels, info.unschedulable, info.taints, info.allocatable = labels, unschedulable, taints, allocatable
        info.version += 1  # -1 (new) to 0: kept here from now on
        self.topology.set_node(name, labels)
        allowed = tuple(node.status.allowed_host_paths)
        changed = changed or info.allowed_host_paths != allowed
        info.allowed_host_paths = allowed
        info.download, info.upload, info.restore_rates = node_rates(node)
        info.images = self._images.replace(info.images, node_images(node))
        return changed

    def delete_node(self, name: str) -> None:
        info = self._nodes.pop(name, None)
        if info is not None:
            self._images.release(info.images)
            self._order = None
        self.topology.delete_node(name)

    @property
    def image_sizes(self) -> Mapping[str, int]:
        """Normalised image name → bytes for every image some node holds (0: no size reported)."""
        return self._images.sizes

    def set_lease(self, lease: v1.Lease) -> float | None:
        """Record the renew time of the Lease named after a node; returns the renew time known before."""
        name = lease.metadata.name
        before = self._renew.get(name)
        renew = lease_renew_time(lease)
        self._renew[name] = renew
        info = self._nodes.get(name)
        if info is not None:
            info.renew_time = renew
        return before

    def delete_lease(self, name: str) -> None:
        self._renew.pop(name, None)
        info = self._nodes.get(name)
        if info is not None:
            info.renew_time = None

    # ---- projects ---------------------------------------------------------------------------------------------

    def observe_project(self, old: v1.Project | None, new: v1.Project) -> ProjectChange:
        """Apply one informer change of a project (`old` None for an add)."""
        freed = [*self._count(new), *self._hold_ports(new), *self._follow_nomination(new)]
        retry = False
        assumption = self._assumed.get(meta.key_of(new))
        if assumption is not None and old is not None and old.metadata.resource_version == assumption.resource_version:
            self._drop(assumption)
            retry = new.status.phase == v1.PENDING
        anti_moved = self._file(meta.key_of(new))
        return ProjectChange(frozenset(freed), anti_moved, retry)

    def forget_project(self, project: v1.Project) -> ProjectChange:
        """Apply an informer deletion: its requests are released and any assumption ends."""
        name = meta.key_of(project)
        counted = self._counted.pop(name, None)
        freed = [] if counted is None or not counted.requests else [counted.node]
        if counted is not None:
            self._add_requested(counted.node, counted.requests, -1)
        assumption = self._assumed.get(name)
        if assumption is not None:
            self._drop(assumption)
        freed += self._release_ports(name)
        anti_moved = self._file(name)
        nominated = self._nominee_node.get(name)
        if self.unnominate(name) and nominated is not None:
            freed.append(nominated)
        return ProjectChange(frozenset(freed), anti_moved)

    def _file(self, name: str) -> bool:
        """File `name` in the topology index where it counts now: bound, else assumed, else nowhere; True when a
        filing with required anti-affinity terms was taken out or moved."""
        counted, assumption, old = self._counted.get(name), self._assumed.get(name), self.topology.placed(name)
        if counted is not None:
            placed: Placed | None = Placed(counted.node, counted.labels, counted.anti_required)
        else:
            placed = assumption.placed if assumption is not None else None
        self.topology.place(name, placed)
        return old is not None and bool(old.anti_required) and (placed is None or placed.node != old.node)

    def _hold_ports(self, project: v1.Project) -> tuple[str, ...]:
        """Make the host ports filed for `project` match its status; returns the nodes where some were released."""
        name, generation = meta.key_of(project), project.metadata.generation
        held = self._held.get(name)
        ports = held.ports if held is not None and held.generation == generation else host_ports(project.spec)
        holds = holds_of(project, ports)
        if held is not None and held.holds == holds:
            held.generation = generation
            return ()
        released = self._release_ports(name)
        for hold in holds:
            self._ports.setdefault(hold.node, PortIndex()).add(name, hold.ports, until=hold.until)
        if holds:
            self._held[name] = Held(generation, ports, holds)
        return released

    def _release_ports(self, name: str) -> tuple[str, ...]:
        held = self._held.pop(name, None)
        if held is None:
            return ()
        for hold in held.holds:
            self._ports.setdefault(hold.node, PortIndex()).remove(name, hold.ports)
        return tuple(hold.node for hold in held.holds)

    def _count(self, project: v1.Project) -> tuple[str, ...]:
        """Make the counted binding of `project` match it; returns the node requests were released from."""
        name = meta.key_of(project)
        status = project.status
        bound = status.phase in v1.BOUND_PHASES and bool(status.node_ref)
        counted = self._counted.get(name)
        same_binding = counted is not None and bound and counted.node == status.node_ref
        if same_binding and counted is not None and counted.generation == project.metadata.generation:
            labels = labels_of(project.metadata.labels, project.metadata.namespace)
            if counted.labels != labels:
                counted.labels = labels
            return ()
        freed = False
        if counted is not None:
            self._add_requested(counted.node, counted.requests, -1)
            del self._counted[name]
            freed = bool(counted.requests)
        if bound:
            requests = project_requests(project)
            self._add_requested(status.node_ref, requests)
            anti = placement_of(project.spec, project.metadata.namespace).anti_required
            labels = labels_of(project.metadata.labels, project.metadata.namespace)
            self._counted[name] = Counted(status.node_ref, requests, project.metadata.generation, labels, anti)
            if counted is not None and counted.node == status.node_ref:
                freed = any(requests.get(r, 0) < v for r, v in counted.requests.items())
        return (counted.node,) if freed and counted is not None else ()

    # ---- nominations ------------------------------------------------------------------------------------------

    def nominate(self, nominee: Nominee, node: str) -> None:
        """Keep room on `node` for `nominee` (replacing any room kept for it elsewhere)."""
        self.unnominate(nominee.name)
        self._nominated.setdefault(node, NominatedRoom()).add(nominee)
        self._nominee_node[nominee.name] = node

    def unnominate(self, name: str) -> bool:
        """Stop keeping room for project `name`; True when some was kept."""
        node = self._nominee_node.pop(name, None)
        if node is None:
            return False
        self._nominated.setdefault(node, NominatedRoom()).remove(name)
        return True

    def nominated_node(self, name: str) -> str:
        """The node room is kept on for project `name` ("" when none)."""
        return self._nominee_node.get(name, "")

    def _follow_nomination(self, project: v1.Project) -> tuple[str, ...]:
        """Make the room kept for `project` match its status; returns the node where room was released."""
        name, node = meta.key_of(project), project.status.nominated_node_name
        before = self._nominee_node.get(name)
        if project.status.phase != v1.PENDING or not node:
            return (before,) if self.unnominate(name) and before is not None else ()
        nominee = Nominee(name, project.spec.priority, project_requests(project), host_ports(project.spec))
        self.nominate(nominee, node)
        return (before,) if before is not None and before != node else ()

    # ---- assumptions ------------------------------------------------------------------------------------------

    def is_assumed(self, name: str) -> bool:
        return name in self._assumed

    def assumption(self, name: str) -> Assumption | None:
        return self._assumed.get(name)

    def assume(self, project: ProjectInfo, node: str) -> Assumption:
        """Count `project` on `node` now, before the bind is written."""
        if project.name in self._assumed:
            raise ValueError(f"project {project.name} is already assumed on {self._assumed[project.name].node}")
        placed = Placed(node, project.labels, project.placement.anti_required)
        assumption = Assumption(
            project.name,
            node,
            dict(project.requests),
            project.resource_version,
            ports=project.host_ports,
            placed=placed,
        )
        self._add_requested(node, assumption.requests)
        self._ports.setdefault(node, PortIndex()).add(project.name, assumption.ports, tag=ASSUMED)
        self._assumed[project.name] = assumption
        self._file(project.name)
        return assumption

    def forget(self, assumption: Assumption) -> bool:
        """End `assumption` now (the bind was refused). Ignored when it already ended; True when it was live."""
        if self._assumed.get(assumption.project) is not assumption:
            return False
        self._drop(assumption)
        return True

    def expire_later(self, assumption: Assumption, *, now: float, ttl: float = DEFAULT_ASSUME_TTL) -> None:
        """The bind's outcome is unknown: keep counting for `ttl` seconds unless the informer settles it first."""
        if self._assumed.get(assumption.project) is assumption:
            assumption.expires_at = now + ttl
            self._expiring[assumption.project] = assumption

    def expired(self, now: float) -> list[str]:
        """End the assumptions whose time ran out; returns their projects (to be tried again)."""
        if not self._expiring:
            return []
        done = [a for a in self._expiring.values() if a.expires_at is not None and a.expires_at <= now]
        for assumption in done:
            self._drop(assumption)
        return [a.project for a in done]

    def _drop(self, assumption: Assumption) -> None:
        del self._assumed[assumption.project]
        self._expiring.pop(assumption.project, None)
        self._add_requested(assumption.node, assumption.requests, -1)
        self._ports.setdefault(assumption.node, PortIndex()).remove(assumption.project, assumption.ports, tag=ASSUMED)
        self._file(assumption.project)

    # ---- reading ----------------------------------------------------------------------------------------------

    def _add_requested(self, node: str, amounts: Mapping[str, int], sign: int = 1) -> None:
        """Count `amounts` on `node` (`sign` -1: no longer); its record, if any, changed (`NodeInfo.version`)."""
        add_into(self._requested.setdefault(node, {}), amounts, sign)
        info = self._nodes.get(node)
        if info is not None:
            info.version += 1

    def requested(self, node: str) -> Resources:
        """What is counted on `node` now (bound and assumed), as a copy."""
        return dict(self._requested.get(node, {}))

    def ports(self, node: str) -> PortIndex:
        """The host ports taken on `node` (bound, assumed, hand-offs), the live index."""
        return self._ports.setdefault(node, PortIndex())

    @property
    def assumed_count(self) -> int:
        return len(self._assumed)


__all__ = ["Assumption", "ClusterState", "DEFAULT_ASSUME_TTL", "ProjectChange"]
