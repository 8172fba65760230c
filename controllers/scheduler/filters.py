"""Filters: may this project go on this node? Each is a small pure function with a name.

The pieces every filter is made of (`Rejection`, `FilterContext`, `Filter`, the `RANK_*` message order) live in
`filterbase.py`; the placement rules' filters in `placementfilters.py`; this module holds the filters that look
at one node only, and `FILTERS`, the chain of them all. Every name is importable from here. Every rejection is
either

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
"""

from __future__ import annotations

from caravanserai.controllers.scheduler.filterbase import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    RANK_AFFINITY,
    RANK_ANTI_AFFINITY,
    RANK_HOST_PATHS,
    RANK_NODE_AFFINITY,
    RANK_PORTS,
    RANK_READY,
    RANK_RESOURCES,
    RANK_SELECTOR,
    RANK_SPREAD,
    RANK_TAINT,
    RANK_TOPOLOGY_LABEL,
    RANK_UNSCHEDULABLE,
    Filter,
    FilterContext,
    FilterFunc,
    PrepareFunc,
    Rejection,
)
from caravanserai.controllers.scheduler.placementfilters import (
    AFFINITY_FILTER,
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_FILTER,
    ANTI_AFFINITY_MISMATCH,
    NODE_AFFINITY_FILTER,
    NODE_AFFINITY_MISMATCH,
    SPREAD_FILTER,
    TOPOLOGY_LABELS_FILTER,
    node_affinity_matches,
    prepare_affinity,
    prepare_anti_affinity,
    prepare_spread,
    topology_labels_present,
)
from caravanserai.controllers.scheduler.resources import add_into
from caravanserai.controllers.scheduler.snapshot import (
    NO_EXECUTE,
    NO_SCHEDULE,
    NodeInfo,
    ProjectInfo,
    TaintInfo,
)
from caravanserai.project import runoptions

NOT_READY = "NotReady"
UNSCHEDULABLE = "unschedulable"
SELECTOR_MISMATCH = "node selector mismatch"
HOST_PATH_NOT_ALLOWED = "node(s) didn't allow host path"
NOT_READY_REJECTION = Rejection(NOT_READY, False, RANK_READY)
UNSCHEDULABLE_REJECTION = Rejection(UNSCHEDULABLE, False, RANK_UNSCHEDULABLE)
_SELECTOR_REJECTION = Rejection(SELECTOR_MISMATCH, True, RANK_SELECTOR)
_INTERNED = 1024  # at most this many rejections of a kind are kept for reuse
_INSUFFICIENT: dict[tuple[str, bool], Rejection] = {}
_UNTOLERATED: dict[str, Rejection] = {}


def insufficient(resource: str, infeasible: bool) -> Rejection:
    """The rejection "insufficient <resource>" (one object per resource and kind: a failed search, which counts
    a rejection per node, neither builds nor compares new ones)."""
    rejection = _INSUFFICIENT.get((resource, infeasible))
    if rejection is None:
        rejection = Rejection(f"insufficient {resource}", infeasible, RANK_RESOURCES)
        if len(_INSUFFICIENT) < _INTERNED:  # resource names are few; never grow without bound
            _INSUFFICIENT[(resource, infeasible)] = rejection
    return rejection


def node_ready(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """The node's Lease was renewed within the heartbeat timeout (a node without a Lease is not Ready)."""
    if node.renew_time is not None and ctx.now < node.renew_time + ctx.heartbeat_timeout:
        return None
    return NOT_READY_REJECTION


def node_schedulable(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """The node is not cordoned (`spec.unschedulable`)."""
    return UNSCHEDULABLE_REJECTION if node.unschedulable else None


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
            return insufficient(name, True)
        if short is None and want > have - requested.get(name, 0):
            short = name
    return None if short is None else insufficient(short, False)


def node_selector_matches(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """Every `nodeSelector` label of the project is on the node with the same value."""
    labels = node.labels
    for key, value in project.node_selector.items():
        if labels.get(key) != value:
            return _SELECTOR_REJECTION
    return None


def has_node_selector(project: ProjectInfo) -> bool:
    """Whether `node_selector_matches` can refuse a node for `project` (an empty selector matches every node)."""
    return bool(project.node_selector)


def taints_tolerated(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """Every NoSchedule and NoExecute taint of the node is tolerated (PreferNoSchedule only lowers the score)."""
    for taint in node.taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(project, taint):
            return _untolerated(taint.key)
    return None


def _untolerated(key: str) -> Rejection:
    rejection = _UNTOLERATED.get(key)
    if rejection is None:
        rejection = Rejection(f"untolerated taint {key}", True, RANK_TAINT)
        if len(_UNTOLERATED) < _INTERNED:  # taint keys are few; never grow without bound
            _UNTOLERATED[key] = rejection
    return rejection


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
_PORTS_REJECTION = Rejection(NO_FREE_PORTS, False, RANK_PORTS)


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
    return _PORTS_REJECTION


def has_host_ports(project: ProjectInfo) -> bool:
    """Whether `ports_free` can refuse a node for `project` (it publishes no host port: never)."""
    return bool(project.host_ports)


PORTS_FILTER = Filter("NodePorts", ports_free, needed=has_host_ports)


FILTERS: tuple[Filter, ...] = (
    Filter("NodeSelector", node_selector_matches, needed=has_node_selector),
    NODE_AFFINITY_FILTER,
    TOPOLOGY_LABELS_FILTER,
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


def _prepared(
    project: ProjectInfo, filters: tuple[Filter, ...], ctx: FilterContext | None
) -> list[tuple[Filter, FilterFunc]]:
    out: list[tuple[Filter, FilterFunc]] = []
    for item in filters:
        if item.needed is not None and not item.needed(project):
            continue
        if item.prepare is None or ctx is None:
            out.append((item, item.check))
            continue
        prepared = item.prepare(project, ctx)
        if prepared is not None:
            out.append((item, prepared))
    return out


def checks_for(
    project: ProjectInfo, filters: tuple[Filter, ...] = FILTERS, ctx: FilterContext | None = None
) -> tuple[FilterFunc, ...]:
    """The checks of `filters`, in order, that can refuse some node for `project` (see `Filter.needed`); with
    `ctx`, prepared for one decision (see `Filter.prepare`)."""
    return tuple(check for _, check in _prepared(project, filters, ctx))


def search_checks(
    project: ProjectInfo, filters: tuple[Filter, ...], ctx: FilterContext
) -> tuple[tuple[FilterFunc, ...], tuple[FilterFunc, ...]]:
    """The prepared checks of one decision twice: in search order (the `by_domain` ones first: they refuse whole
    domains for the price of a lookup, before the per-node arithmetic), and in the order of `filters` (the
    canonical order, which decides under which reason a refused node is counted). A node passes all of the first
    exactly when it passes all of the second; both are the same tuple when nothing moves."""
    prepared = _prepared(project, filters, ctx)
    canonical = tuple(check for _, check in prepared)
    first = [check for item, check in prepared if item.by_domain]
    if not first or len(first) == len(prepared):
        return canonical, canonical
    return (*first, *(check for item, check in prepared if not item.by_domain)), canonical


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
    "NODE_AFFINITY_FILTER",
    "TOPOLOGY_LABELS_FILTER",
    "search_checks",
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
