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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from caravanserai.controllers.scheduler.resources import add_into
from caravanserai.controllers.scheduler.snapshot import (
    NO_EXECUTE,
    NO_SCHEDULE,
    NodeInfo,
    ProjectInfo,
    TaintInfo,
)
from caravanserai.project import runoptions

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
    """What filters need besides the project and the node: the time now and the heartbeat timeout."""

    now: float
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT


FilterFunc = Callable[[ProjectInfo, NodeInfo, FilterContext], Rejection | None]


@dataclass(frozen=True, slots=True)
class Filter:
    """A named filter. `needed(project)`, when given, may say False only when the filter passes every node for
    that project (a decision then leaves it out; None: always run it)."""

    name: str
    check: FilterFunc
    needed: Callable[[ProjectInfo], bool] | None = None


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


FILTERS: tuple[Filter, ...] = (
    Filter("NodeSelector", node_selector_matches, needed=has_node_selector),
    Filter("HostPaths", host_paths_allowed, needed=has_host_paths),
    Filter("TaintToleration", taints_tolerated),
    Filter("NodeResourcesFit", resources_fit),
    PORTS_FILTER,
    Filter("NodeReady", node_ready),
    Filter("NodeUnschedulable", node_schedulable),
)
"""Every filter, in the order they run: infeasible checks first, cheapest first among equals."""


def checks_for(project: ProjectInfo, filters: tuple[Filter, ...] = FILTERS) -> tuple[FilterFunc, ...]:
    """The checks of `filters`, in order, that can refuse some node for `project` (see `Filter.needed`)."""
    return tuple(item.check for item in filters if item.needed is None or item.needed(project))


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
