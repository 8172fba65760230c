"""Filters: may this project go on this node? Each is a small pure function with a name.

A filter returns None when the node passes, or a `Rejection` saying why not. Every rejection is either

* **infeasible**: the node can never take the project as the node is declared (its total allocatable is too
  small, its labels do not match the project's nodeSelector, it has a taint the project does not tolerate, its
  agent's --allowed-host-paths do not cover a HostPath volume of the project), or
* **unavailable**: the node may take it later (it is NotReady, cordoned, full right now, or one of the project's
  host ports is taken there: `ports_free`, over the per-node port index of `ports.py`).

`FILTERS` runs the infeasible checks first, so a node that is both down and of the wrong kind is reported as
the wrong kind: a project is called infeasible only when no node could ever take it. `rank` orders the reasons
in the Unschedulable message (readiness first, as operators look for it first).

Readiness is the age of the node's Lease measured on the injected clock (`now`), never a cached state: a node is
Ready while `now < renew_time + heartbeat_timeout`.

Placement rules (`caravanserai.project.affinity`): unmatched required node affinity and a missing topology label of
a DoNotSchedule spread constraint are infeasible; required project affinity, anti-affinity (own, and placed
projects' against it) and DoNotSchedule spread are unavailable (other projects come and go). These read placed
projects only through `FilterContext.topology`: the live index, or `index.without(victims)` for preemption's
"would it fit once they are gone?". They are prepared once per decision (`Filter.prepare`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from caravanserai.controllers.scheduler.resources import add_into
from caravanserai.controllers.scheduler.snapshot import (
    NO_EXECUTE,
    NO_SCHEDULE,
    NodeInfo,
    ProjectInfo,
    TaintInfo,
)
from caravanserai.controllers.scheduler.topology import EMPTY_TOPOLOGY, TopologyView, least_loaded, node_rules
from caravanserai.project import runoptions
from caravanserai.project.affinity import HOSTNAME_KEY, short_key, topology_value

DEFAULT_HEARTBEAT_TIMEOUT = 90.0

NOT_READY = "NotReady"
UNSCHEDULABLE = "unschedulable"
SELECTOR_MISMATCH = "node selector mismatch"
HOST_PATH_NOT_ALLOWED = "node(s) didn't allow host path"


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a node was refused: `reason` is what the message counts ("insufficient memory"), `rank` orders the
    reasons in it, `infeasible` whether the node could never take the project."""

    reason: str
    infeasible: bool
    rank: int


@dataclass(frozen=True, slots=True)
class FilterContext:
    """What filters need besides the project and the node: the time now, the heartbeat timeout, and the placed
    projects by topology domain (`topology`: the scheduler's live index, or a what-if view of it)."""

    now: float
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT
    topology: TopologyView = EMPTY_TOPOLOGY


FilterFunc = Callable[[ProjectInfo, NodeInfo, FilterContext], Rejection | None]
PrepareFunc = Callable[[ProjectInfo, FilterContext], FilterFunc | None]


@dataclass(frozen=True, slots=True)
class Filter:
    """A named filter. `needed(project)`, when given, may say False only when the filter passes every node for
    that project (a decision then leaves it out; None: always run it). `prepare(project, ctx)`, when given, works
    out once per decision what `check` would look up per node and returns the equivalent per-node check (None:
    it passes every node); `check` stays the unprepared form (it prepares on each call)."""

    name: str
    check: FilterFunc
    needed: Callable[[ProjectInfo], bool] | None = None
    prepare: PrepareFunc | None = None


# Message order of the reasons (lower first).
RANK_READY, RANK_UNSCHEDULABLE, RANK_RESOURCES, RANK_SELECTOR, RANK_TAINT, RANK_HOST_PATHS = range(6)


def node_ready(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """The node's Lease was renewed within the heartbeat timeout (a node without a Lease is not Ready)."""
    if node.renew_time is not None and ctx.now < node.renew_time + ctx.heartbeat_timeout:
        return None
    return Rejection(NOT_READY, False, RANK_READY)


def node_schedulable(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """The node is not cordoned (`spec.unschedulable`)."""
    return Rejection(UNSCHEDULABLE, False, RANK_UNSCHEDULABLE) if node.unschedulable else None


def resources_fit(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """Allocatable minus the requests already on the node (and the room kept there for nominated projects of the
    same or a higher priority, `nominated.py`) covers every request of the project.

    A request larger than the node's whole allocatable is infeasible; one larger than what is free now is
    unavailable. The first infeasible resource is reported, else the first unavailable one (cpu, memory, then
    the others by name).
    """
    allocatable, requested = node.allocatable, node.requested
    if node.nominated:  # room kept for projects nominated here of the same or a higher priority
        requested = dict(requested)
        add_into(requested, node.nominated.reserved(project.name, project.priority))
    short: str | None = None
    for name, want in project.ordered_requests:
        have = allocatable.get(name, 0)
        if want > have:
            return Rejection(f"insufficient {name}", True, RANK_RESOURCES)
        if short is None and want > have - requested.get(name, 0):
            short = name
    return None if short is None else Rejection(f"insufficient {short}", False, RANK_RESOURCES)


def node_selector_matches(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """Every `nodeSelector` label of the project is on the node with the same value."""
    labels = node.labels
    for key, value in project.node_selector.items():
        if labels.get(key) != value:
            return Rejection(SELECTOR_MISMATCH, True, RANK_SELECTOR)
    return None


def has_node_selector(project: ProjectInfo) -> bool:
    """Whether `node_selector_matches` can refuse a node for `project` (an empty selector matches every node)."""
    return bool(project.node_selector)


def taints_tolerated(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """Every NoSchedule and NoExecute taint of the node is tolerated (PreferNoSchedule only lowers the score)."""
    for taint in node.taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(project, taint):
            return Rejection(f"untolerated taint {taint.key}", True, RANK_TAINT)
    return None


def tolerated(project: ProjectInfo, taint: TaintInfo) -> bool:
    """Whether one of the project's tolerations matches `taint`."""
    return any(toleration.tolerates(taint) for toleration in project.tolerations)


def host_paths_allowed(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """Every host path of the project's HostPath volumes is under one of the node's allowed host paths (a node
    without an allow-list allows any); the message names the first path refused."""
    refused = runoptions.uncovered(project.host_paths, node.allowed_host_paths)
    return Rejection(f"{HOST_PATH_NOT_ALLOWED} {refused[0]}", True, RANK_HOST_PATHS) if refused else None


def has_host_paths(project: ProjectInfo) -> bool:
    """Whether `host_paths_allowed` can refuse a node for `project` (one without HostPath volumes fits all)."""
    return bool(project.host_paths)


# ---- host ports ----------------------------------------------------------------------------------------------

NO_FREE_PORTS = "node(s) didn't have free ports"
RANK_PORTS = RANK_HOST_PATHS + 1


def ports_free(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """None of the project's host ports (hostPort, protocol, hostIP) is taken on the node by another project:
    bound or assumed there, or the old copy of a project moved off it whose hand-off still runs (`ports.py`), nor
    kept there for a nominated project of the same or a higher priority (`nominated.py`).
    A taken port is unavailable, not infeasible: it frees up when its holder goes."""
    nominated = node.nominated
    if node.ports.conflict(project.name, project.host_ports, now=ctx.now) is None and not (
        nominated and nominated.port_conflict(project.name, project.priority, project.host_ports)
    ):
        return None
    return Rejection(NO_FREE_PORTS, False, RANK_PORTS)


def has_host_ports(project: ProjectInfo) -> bool:
    """Whether `ports_free` can refuse a node for `project` (it publishes no host port: never)."""
    return bool(project.host_ports)


PORTS_FILTER = Filter("NodePorts", ports_free, needed=has_host_ports)


# ---- placement rules (caravanserai.project.affinity) ---------------------------------------------------------

NODE_AFFINITY_MISMATCH = "node(s) didn't match node affinity"
AFFINITY_MISMATCH = "node(s) didn't match project affinity"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match project anti-affinity"
RANK_NODE_AFFINITY, RANK_TOPOLOGY_LABEL, RANK_AFFINITY, RANK_ANTI_AFFINITY, RANK_SPREAD = range(
    RANK_PORTS + 1, RANK_PORTS + 6
)
_NODE_AFFINITY = Rejection(NODE_AFFINITY_MISMATCH, True, RANK_NODE_AFFINITY)
_AFFINITY = Rejection(AFFINITY_MISMATCH, False, RANK_AFFINITY)
_ANTI_AFFINITY = Rejection(ANTI_AFFINITY_MISMATCH, False, RANK_ANTI_AFFINITY)


def node_affinity_matches(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """The node matches one of the project's required node affinity terms (infeasible when not)."""
    return None if project.placement.node_matches(node.labels) else _NODE_AFFINITY


def prepare_topology_labels(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """The node has the topology label of each DoNotSchedule spread constraint (infeasible when not)."""
    keys = tuple({c.topology_key for c in project.placement.spread if c.hard and c.topology_key != HOSTNAME_KEY})
    if not keys:
        return None

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        labels = node.labels
        for key in keys:
            if key not in labels:
                return Rejection(f"node(s) lack topology label {short_key(key)}", True, RANK_TOPOLOGY_LABEL)
        return None

    return check


def prepare_affinity(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """Required project affinity: every term has a matching placed project in the node's domain. A term no placed
    project matches, whose selector matches the project itself, accepts any node with the topology label (the
    first of a group goes anywhere, as in Kubernetes)."""
    wanted: list[tuple[str, Mapping[str, int] | None]] = []
    for term in project.placement.affinity_required:
        counts = ctx.topology.domain_counts(term)
        first = not counts and term.selector.matches(project.labels)
        wanted.append((term.topology_key, None if first else counts))
    if not wanted:
        return None

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        for key, counts in wanted:
            value = topology_value(node.name, node.labels, key)
            if value is None or (counts is not None and value not in counts):
                return _AFFINITY
        return None

    return check


def prepare_anti_affinity(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """Required anti-affinity: no placed project matching one of the project's terms in the node's domain, and no
    placed project whose own required anti-affinity matches this project there (a node without the topology
    label has no such domain and passes)."""
    topology = ctx.topology
    rules = [(t.topology_key, topology.domain_counts(t)) for t in project.placement.anti_required]
    rules = [(key, counts) for key, counts in (*rules, *topology.anti_affinity_against(project.labels)) if counts]
    if not rules:
        return None

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        for key, counts in rules:
            value = topology_value(node.name, node.labels, key)
            if value is not None and value in counts:
                return _ANTI_AFFINITY
        return None

    return check


def prepare_spread(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """DoNotSchedule spread constraints: placing the project in the node's domain leaves it at most `maxSkew`
    matching projects above the least loaded domain (domains: those of the nodes that pass the project's node
    selector and required node affinity)."""
    hard = [c for c in project.placement.spread if c.hard]
    if not hard:
        return None
    topology, eligible = ctx.topology, node_rules(project)
    rules: list[tuple[str, Mapping[str, int], int, Rejection]] = []
    for constraint in hard:
        key = constraint.topology_key
        counts = topology.domain_counts(constraint.term)
        least = least_loaded(counts, topology.domains(key, eligible))
        own = 1 if constraint.selector.matches(project.labels) else 0
        reason = f"node(s) would exceed maxSkew {constraint.max_skew} in {short_key(key)}"
        rules.append((key, counts, least + constraint.max_skew - own, Rejection(reason, False, RANK_SPREAD)))

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        for key, counts, limit, rejection in rules:
            value = topology_value(node.name, node.labels, key)
            if value is not None and counts.get(value, 0) > limit:
                return rejection
        return None

    return check


def _unprepared(prepare: PrepareFunc) -> FilterFunc:
    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        prepared = prepare(project, ctx)
        return None if prepared is None else prepared(project, node, ctx)

    return check


topology_labels_present = _unprepared(prepare_topology_labels)
AFFINITY_FILTER = Filter(
    "ProjectAffinity", _unprepared(prepare_affinity), lambda p: bool(p.placement.affinity_required), prepare_affinity
)
ANTI_AFFINITY_FILTER = Filter("ProjectAntiAffinity", _unprepared(prepare_anti_affinity), None, prepare_anti_affinity)
SPREAD_FILTER = Filter(
    "TopologySpread", _unprepared(prepare_spread), lambda p: any(c.hard for c in p.placement.spread), prepare_spread
)


FILTERS: tuple[Filter, ...] = (
    Filter("NodeSelector", node_selector_matches, needed=has_node_selector),
    Filter("NodeAffinity", node_affinity_matches, needed=lambda p: bool(p.placement.node_required)),
    Filter(
        "TopologyLabels",
        topology_labels_present,
        lambda p: any(c.hard for c in p.placement.spread),
        prepare_topology_labels,
    ),
    Filter("HostPaths", host_paths_allowed, needed=has_host_paths),
    Filter("TaintToleration", taints_tolerated),
    Filter("NodeResourcesFit", resources_fit),
    PORTS_FILTER,
    Filter("NodeReady", node_ready),
    Filter("NodeUnschedulable", node_schedulable),
    AFFINITY_FILTER,
    ANTI_AFFINITY_FILTER,
    SPREAD_FILTER,
)
"""Every filter, in the order they run: infeasible checks first, cheapest first among equals, inter-project last."""


def checks_for(
    project: ProjectInfo, filters: tuple[Filter, ...] = FILTERS, ctx: FilterContext | None = None
) -> tuple[FilterFunc, ...]:
    """The checks of `filters`, in order, that can refuse some node for `project` (see `Filter.needed`); with
    `ctx`, prepared for one decision (see `Filter.prepare`)."""
    checks: list[FilterFunc] = []
    for item in filters:
        if item.needed is not None and not item.needed(project):
            continue
        if item.prepare is None or ctx is None:
            checks.append(item.check)
            continue
        prepared = item.prepare(project, ctx)
        if prepared is not None:
            checks.append(prepared)
    return tuple(checks)


def first_rejection(
    project: ProjectInfo, node: NodeInfo, ctx: FilterContext, filters: tuple[Filter, ...] = FILTERS
) -> Rejection | None:
    """The first filter's rejection of `node`, or None when the node passes them all."""
    for item in filters:
        rejection = item.check(project, node, ctx)
        if rejection is not None:
            return rejection
    return None


__all__ = [
    "AFFINITY_FILTER",
    "AFFINITY_MISMATCH",
    "ANTI_AFFINITY_FILTER",
    "ANTI_AFFINITY_MISMATCH",
    "NODE_AFFINITY_MISMATCH",
    "PrepareFunc",
    "RANK_AFFINITY",
    "RANK_ANTI_AFFINITY",
    "RANK_NODE_AFFINITY",
    "RANK_SPREAD",
    "RANK_TOPOLOGY_LABEL",
    "SPREAD_FILTER",
    "node_affinity_matches",
    "prepare_affinity",
    "prepare_anti_affinity",
    "prepare_spread",
    "topology_labels_present",
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "FILTERS",
    "Filter",
    "FilterContext",
    "FilterFunc",
    "HOST_PATH_NOT_ALLOWED",
    "NOT_READY",
    "RANK_HOST_PATHS",
    "NO_FREE_PORTS",
    "PORTS_FILTER",
    "RANK_PORTS",
    "RANK_READY",
    "RANK_RESOURCES",
    "RANK_SELECTOR",
    "RANK_TAINT",
    "RANK_UNSCHEDULABLE",
    "Rejection",
    "SELECTOR_MISMATCH",
    "UNSCHEDULABLE",
    "checks_for",
    "first_rejection",
    "has_host_paths",
    "has_host_ports",
    "has_node_selector",
    "host_paths_allowed",
    "node_ready",
    "node_schedulable",
    "node_selector_matches",
    "ports_free",
    "resources_fit",
    "taints_tolerated",
    "tolerated",
]
