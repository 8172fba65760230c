"""What every filter is made of: the `Rejection` it returns, the `FilterContext` it reads, the `Filter` record that
names it, and the message order of the reasons (`RANK_*`). The filters themselves live in `filters.py` (one node
at a time) and `placementfilters.py` (placement rules); `filters.FILTERS` orders them all.

A filter returns None when the node passes, or a `Rejection`: **infeasible** (the node can never take the project
as it is declared) or **unavailable** (it may later). A filter may be **prepared** once per decision
(`Filter.prepare`): what it would look up per node is looked up once, and the per-node check it returns is
equivalent to the unprepared one on every node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.controllers.scheduler.topology import EMPTY_TOPOLOGY, TopologyView

DEFAULT_HEARTBEAT_TIMEOUT = 90.0


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
    it passes every node); `check` stays the unprepared form (it prepares on each call). `by_domain`: the
    prepared check decides from the node's topology domains alone, in a dict lookup or two, so a search may run
    it before the others (`filters.search_checks`)."""

    name: str
    check: FilterFunc
    needed: Callable[[ProjectInfo], bool] | None = None
    prepare: PrepareFunc | None = None
    by_domain: bool = False


def unprepared(prepare: PrepareFunc) -> FilterFunc:
    """The per-node form of a prepared filter: it prepares on each call (for what-if views, which differ per
    call)."""

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        prepared = prepare(project, ctx)
        return None if prepared is None else prepared(project, node, ctx)

    return check


# Message order of the reasons (lower first): readiness first, as operators look for it first.
RANK_READY, RANK_UNSCHEDULABLE, RANK_RESOURCES, RANK_SELECTOR, RANK_TAINT, RANK_HOST_PATHS, RANK_PORTS = range(7)
RANK_NODE_AFFINITY, RANK_TOPOLOGY_LABEL, RANK_AFFINITY, RANK_ANTI_AFFINITY, RANK_SPREAD = range(7, 12)


__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "Filter",
    "FilterContext",
    "FilterFunc",
    "PrepareFunc",
    "RANK_AFFINITY",
    "RANK_ANTI_AFFINITY",
    "RANK_HOST_PATHS",
    "RANK_NODE_AFFINITY",
    "RANK_PORTS",
    "RANK_READY",
    "RANK_RESOURCES",
    "RANK_SELECTOR",
    "RANK_SPREAD",
    "RANK_TAINT",
    "RANK_TOPOLOGY_LABEL",
    "RANK_UNSCHEDULABLE",
    "Rejection",
    "unprepared",
]
