"""The node-local filters every decision runs, fused into one call per node.

A decision runs its checks on hundreds of nodes (a failed one on every node), and the filters every project runs
— TaintToleration, NodeResourcesFit, NodePorts (for a project publishing host ports), NodeReady and
NodeUnschedulable — cost a Python call each per node. `fuse` replaces that run of checks, found in the order
`filters.FILTERS` has it, by one check that does the same per node in one call.

Guarantees:

* **The same verdict.** For every node, the fused check returns exactly the rejection the run would have: the first
  one in the run's order, the same (interned) `Rejection` object, or None. Checked against the run itself on
  generated nodes in the unit tests.
* **One home per rule.** Only the common path is written out here — a node without taints, without room kept for
  nominated projects — each step beside the filter it mirrors; a node with taints or nominations, and host ports,
  are judged by the filters themselves.
* **Only an exact run is fused.** A policy with these filters in another order, or with other filters between
  them, is run as it is; `fuse` returns its checks unchanged.
* **Prepared for one decision.** The fused check reads the time and heartbeat timeout of the context it was
  prepared with (as every prepared check, `filterbase.Filter.prepare`).
"""

from __future__ import annotations

from caravanserai.controllers.scheduler.filters import (
    NOT_READY_REJECTION,
    UNSCHEDULABLE_REJECTION,
    FilterContext,
    FilterFunc,
    Rejection,
    insufficient,
    node_ready,
    node_schedulable,
    ports_free,
    resources_fit,
    taints_tolerated,
)
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo

BASICS: tuple[FilterFunc, ...] = (taints_tolerated, resources_fit, node_ready, node_schedulable)
"""The run fused for a project without host ports (FILTERS leaves NodePorts out for it)."""
BASICS_WITH_PORTS: tuple[FilterFunc, ...] = (taints_tolerated, resources_fit, ports_free, node_ready, node_schedulable)
"""The run fused for a project publishing host ports."""


def fuse(project: ProjectInfo, checks: tuple[FilterFunc, ...], ctx: FilterContext) -> tuple[FilterFunc, ...]:
    """`checks` with the run `BASICS_WITH_PORTS` or `BASICS` (the first found) replaced by one fused check."""
    for run in (BASICS_WITH_PORTS, BASICS):
        size = len(run)
        for at in range(len(checks) - size + 1):
            if checks[at : at + size] == run:
                return (*checks[:at], fused_basics(project, ctx, ports=run is BASICS_WITH_PORTS), *checks[at + size :])
    return checks


def fused_basics(project: ProjectInfo, ctx: FilterContext, *, ports: bool = False) -> FilterFunc:
    """The checks of `BASICS` (with `ports`: of `BASICS_WITH_PORTS`) in one, for deciding on `project` in `ctx`."""
    now, timeout = ctx.now, ctx.heartbeat_timeout
    # (resource, amount, its infeasible rejection, its unavailable one): the rejections looked up once
    requests = tuple(
        (name, want, insufficient(name, True), insufficient(name, False)) for name, want in project.ordered_requests
    )

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        if node.taints:  # taints_tolerated (a node without taints passes it)
            rejection = taints_tolerated(project, node, ctx)
            if rejection is not None:
                return rejection
        if node.nominated:  # resources_fit, with room kept for nominated projects
            rejection = resources_fit(project, node, ctx)
            if rejection is not None:
                return rejection
        else:  # resources_fit, written out for a node without nominations
            allocatable, requested = node.allocatable, node.requested
            short: Rejection | None = None
            for name, want, never, not_now in requests:
                have = allocatable.get(name, 0)
                if want > have:
                    return never
                if short is None and want > have - requested.get(name, 0):
                    short = not_now
            if short is not None:
                return short
        if ports:
            rejection = ports_free(project, node, ctx)
            if rejection is not None:
                return rejection
        renew = node.renew_time  # node_ready
        if renew is None or not now < renew + timeout:
            return NOT_READY_REJECTION
        return UNSCHEDULABLE_REJECTION if node.unschedulable else None  # node_schedulable

    return check


__all__ = ["BASICS", "BASICS_WITH_PORTS", "fuse", "fused_basics"]
