"""What-if: a node as the filters would see it with a set of projects taken off it.

This is the one place preemption builds such a view, and the scheduler's real filter chain (`filters.py`, the
same checks a decision runs, in the same order) is run against it: a victim set is right exactly when the
preemptor passes every filter there.

The view subtracts the victims from

* the node's requested sums (`NodeInfo.requested`), and
* the host ports held on the node (`PortIndex.without`);

and leaves the rest as it is (labels, taints, readiness, nominations of others). Filters that look beyond one
node (rules between projects, through the cluster-wide state a `FilterContext` carries) see the cluster with the
victims taken away through `context_without`: the seam where such a view is subtracted too.

**Cheap when rules cannot change.** Preparing the inter-project checks against each view costs a count lookup
per check and set tried. When the preemptor has no inter-project rule and no placed project's required
anti-affinity matches it, those checks pass every node on the live index and on every view (taking projects away
never adds a refusal), so `whatif_checks` gives the checks prepared once for the decision instead.

A view shares the live records it was made from: it is valid for the decision that made it (decisions never
await), never stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from caravanserai.controllers.scheduler.filters import Filter, FilterContext, FilterFunc, checks_for
from caravanserai.controllers.scheduler.preemption.index import Candidate
from caravanserai.controllers.scheduler.resources import add_into
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.controllers.scheduler.topology import TopologyIndex


def node_without(node: NodeInfo, victims: Sequence[Candidate]) -> NodeInfo:
    """`node` with the requests and host ports of `victims` (projects bound to it) taken off."""
    requested = dict(node.requested)
    for victim in victims:
        add_into(requested, victim.requests, -1)
    holders = frozenset(victim.name for victim in victims if victim.ports)
    ports = node.ports.without(holders) if holders else node.ports
    return dataclasses.replace(node, requested=requested, ports=ports)


def context_without(ctx: FilterContext, node: NodeInfo, victims: Sequence[Candidate]) -> FilterContext:
    """The filter context of a decision with `victims` taken off `node`: the topology index of placed projects
    (what inter-project filters read) without them, when the context carries the live index. The checks run
    against it must be the unprepared ones (`checks_for` without a context), so that they read this view."""
    if not victims or not isinstance(ctx.topology, TopologyIndex):
        return ctx
    return dataclasses.replace(ctx, topology=ctx.topology.without(victim.name for victim in victims))


def whatif_checks(project: ProjectInfo, filters: tuple[Filter, ...], ctx: FilterContext) -> tuple[FilterFunc, ...]:
    """The checks `passes` should run for `project`: prepared once for the decision when no removal can change an
    inter-project verdict for it (see the module docstring), else the unprepared ones (each prepares against the
    view it is given)."""
    if project.placement.inter_project or ctx.topology.anti_affinity_against(project.labels):
        return checks_for(project, filters)
    return checks_for(project, filters, ctx)


def passes(
    project: ProjectInfo,
    node: NodeInfo,
    victims: Sequence[Candidate],
    ctx: FilterContext,
    checks: Sequence[FilterFunc],
) -> bool:
    """Whether `project` passes every check on `node` once `victims` are gone from it."""
    view = node_without(node, victims)
    view_ctx = context_without(ctx, node, victims)
    return all(check(project, view, view_ctx) is None for check in checks)


__all__ = ["context_without", "node_without", "passes", "whatif_checks"]
