"""Filters of the placement rules (`caravanserai.project.affinity`): required node affinity, the topology labels of
DoNotSchedule spread constraints, required project affinity and anti-affinity, DoNotSchedule spread.

Unmatched required node affinity and a missing topology label of a DoNotSchedule spread constraint are
infeasible; required project affinity, anti-affinity (own, and placed projects' against it) and DoNotSchedule
spread are unavailable (other projects come and go). The inter-project ones read placed projects only through
`FilterContext.topology`: the live index, or `index.without(victims)` for preemption's "would it fit once they
are gone?".

**Decided by domain.** Every filter here but node affinity is prepared once per decision (`Filter.prepare`) into
domain-level facts — per rule, the set of refused (or, for affinity, accepted) values of its topology key — so
the per-node check is one label lookup and one set lookup per rule, whatever the number of placed projects, and
a search may run these checks first (`Filter.by_domain`).
"""

from __future__ import annotations

from collections.abc import Collection

from caravanserai.controllers.scheduler.filterbase import (
    RANK_AFFINITY,
    RANK_ANTI_AFFINITY,
    RANK_NODE_AFFINITY,
    RANK_SPREAD,
    RANK_TOPOLOGY_LABEL,
    Filter,
    FilterContext,
    FilterFunc,
    Rejection,
    unprepared,
)
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.controllers.scheduler.topology import least_loaded, node_rules
from caravanserai.project.affinity import HOSTNAME_KEY, short_key

NODE_AFFINITY_MISMATCH = "node(s) didn't match node affinity"
AFFINITY_MISMATCH = "node(s) didn't match project affinity"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match project anti-affinity"
_NODE_AFFINITY = Rejection(NODE_AFFINITY_MISMATCH, True, RANK_NODE_AFFINITY)
_AFFINITY = Rejection(AFFINITY_MISMATCH, False, RANK_AFFINITY)
_ANTI_AFFINITY = Rejection(ANTI_AFFINITY_MISMATCH, False, RANK_ANTI_AFFINITY)

DomainRule = tuple[str, Collection[str], Rejection]
"""(topology key, refused domains, rejection): a node whose domain of the key is refused gets the rejection."""


def node_affinity_matches(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """The node matches one of the project's required node affinity terms (infeasible when not)."""
    return None if project.placement.node_matches(node.labels) else _NODE_AFFINITY


def refusing(rules: list[DomainRule]) -> FilterFunc | None:
    """The per-node check of `rules` (None when there are none): the first rule whose refused domains hold the
    node's domain (`topology_value`, inlined: this runs per node searched); a node without the key passes it."""
    if not rules:
        return None

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        labels = node.labels
        for key, refused, rejection in rules:
            value = labels.get(key)
            if value is None:
                if key != HOSTNAME_KEY:
                    continue
                value = node.name
            if value in refused:
                return rejection
        return None

    return check


def prepare_topology_labels(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """The node has the topology label of each DoNotSchedule spread constraint (infeasible when not)."""
    keys = tuple({c.topology_key for c in project.placement.spread if c.hard and c.topology_key != HOSTNAME_KEY})
    if not keys:
        return None
    rejections = {
        key: Rejection(f"node(s) lack topology label {short_key(key)}", True, RANK_TOPOLOGY_LABEL) for key in keys
    }

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        labels = node.labels
        for key in keys:
            if key not in labels:
                return rejections[key]
        return None

    return check


def prepare_affinity(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """Required project affinity: every term has a matching placed project in the node's domain, and the node has
    every term's topology label. The first of a group goes anywhere those labels are (as in Kubernetes): when no
    placed project matches any of the terms and the project matches every term's selector itself, only the
    labels are asked for."""
    terms = project.placement.affinity_required
    if not terms:
        return None
    counted = [(term.topology_key, ctx.topology.domain_counts(term)) for term in terms]
    first = not any(counts for _, counts in counted) and all(t.selector.matches(project.labels) for t in terms)
    wanted: list[tuple[str, Collection[str] | None]] = [
        (key, None if first else counts.keys()) for key, counts in counted
    ]

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        labels = node.labels
        for key, accepted in wanted:
            value = labels.get(key)
            if value is None and key == HOSTNAME_KEY:
                value = node.name
            if value is None or (accepted is not None and value not in accepted):
                return _AFFINITY
        return None

    return check


def prepare_anti_affinity(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """Required anti-affinity: no placed project matching one of the project's terms in the node's domain, and no
    placed project whose own required anti-affinity matches this project there (a node without the topology
    label has no such domain and passes)."""
    topology = ctx.topology
    own = [(t.topology_key, topology.domain_counts(t)) for t in project.placement.anti_required]
    theirs = topology.anti_affinity_against(project.labels)
    return refusing([(key, counts.keys(), _ANTI_AFFINITY) for key, counts in (*own, *theirs) if counts])


def prepare_spread(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """DoNotSchedule spread constraints: placing the project in the node's domain leaves it at most `maxSkew`
    matching projects above the least loaded domain (domains: those of the nodes that pass the project's node
    selector and required node affinity)."""
    hard = [c for c in project.placement.spread if c.hard]
    if not hard:
        return None
    topology, eligible = ctx.topology, node_rules(project)
    rules: list[DomainRule] = []
    for constraint in hard:
        key = constraint.topology_key
        counts = topology.domain_counts(constraint.term)
        least = least_loaded(counts, topology.domains(key, eligible))
        own = 1 if constraint.selector.matches(project.labels) else 0
        limit = least + constraint.max_skew - own  # at least 0: a domain without matching projects never exceeds
        refused = {value for value, count in counts.items() if count > limit}
        if refused:
            reason = f"node(s) would exceed maxSkew {constraint.max_skew} in {short_key(key)}"
            rules.append((key, refused, Rejection(reason, False, RANK_SPREAD)))
    return refusing(rules)


def _has_hard_spread(project: ProjectInfo) -> bool:
    return any(c.hard for c in project.placement.spread)


topology_labels_present = unprepared(prepare_topology_labels)
NODE_AFFINITY_FILTER = Filter("NodeAffinity", node_affinity_matches, needed=lambda p: bool(p.placement.node_required))
TOPOLOGY_LABELS_FILTER = Filter(
    "TopologyLabels", topology_labels_present, _has_hard_spread, prepare_topology_labels, by_domain=True
)
AFFINITY_FILTER = Filter(
    "ProjectAffinity",
    unprepared(prepare_affinity),
    lambda p: bool(p.placement.affinity_required),
    prepare_affinity,
    by_domain=True,
)
ANTI_AFFINITY_FILTER = Filter(
    "ProjectAntiAffinity", unprepared(prepare_anti_affinity), None, prepare_anti_affinity, by_domain=True
)
SPREAD_FILTER = Filter("TopologySpread", unprepared(prepare_spread), _has_hard_spread, prepare_spread, by_domain=True)


__all__ = [
    "AFFINITY_FILTER",
    "AFFINITY_MISMATCH",
    "ANTI_AFFINITY_FILTER",
    "ANTI_AFFINITY_MISMATCH",
    "DomainRule",
    "NODE_AFFINITY_FILTER",
    "NODE_AFFINITY_MISMATCH",
    "SPREAD_FILTER",
    "TOPOLOGY_LABELS_FILTER",
    "node_affinity_matches",
    "prepare_affinity",
    "prepare_anti_affinity",
    "prepare_spread",
    "prepare_topology_labels",
    "refusing",
    "topology_labels_present",
]
