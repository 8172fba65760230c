"""Filters of the placement rules (`caravanserai.project.affinity`): required node affinity, the topology labels of
DoNotSchedule spread constraints, required project affinity and anti-affinity, DoNotSchedule spread.

Unmatched required node affinity and a missing topology label of a DoNotSchedule spread constraint are
infeasible; required project affinity, anti-affinity (own, and placed projects' against it) and DoNotSchedule
spread are unavailable (other projects come and go). The inter-project ones read placed projects only through
`FilterContext.topology`: the live index, or `index.without(victims)` for preemption's "would it fit once they
are gone?". Namespaces: as in Kubernetes, a project's affinity, anti-affinity and spread terms select projects of
its own namespace only (its selectors carry the namespace, placed projects' labels theirs: `affinity.labels_of`);
a placed project's required anti-affinity repels only projects of its namespace.

**Decided by domain.** Every filter here but node affinity is prepared once per decision (`Filter.prepare`) into
domain-level facts — per rule, the set of refused (or, for affinity, accepted) values of its topology key — so
the per-node check is one label lookup and one set lookup per rule, whatever the number of placed projects, and
a search may run these checks first (`Filter.by_domain`). Prepared, they are `DomainCheck`s, whose rules are data:
several in a row are merged into one check of all their rules in order (`merged`: the same first rejection on
every node, one call per node).
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

DomainRule = tuple[str, "Rejection | None", "Collection[str] | None", "Collection[str] | None", Rejection]
"""(topology key, the rejection of a node without the key (None: it passes), refused domains (None: none), accepted
domains (None: any), the rejection of a refused or not accepted domain). A node's domain of `caravanserai.io/hostname`
is its name when it lacks the label."""


def node_affinity_matches(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
    """The node matches one of the project's required node affinity terms (infeasible when not)."""
    return None if project.placement.node_matches(node.labels) else _NODE_AFFINITY


class DomainCheck:
    """A check prepared by domain: its `rules` (checked in order, the first that refuses answers) and the per-node
    check they make. Checks decided by domain that run one after the other are merged into one (`merged`), so that a
    search calls one function per node for all of them."""

    __slots__ = ("_check", "rules")

    def __init__(self, rules: tuple[DomainRule, ...]) -> None:
        self.rules = rules
        self._check = domain_check(rules)

    def __call__(self, project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        return self._check(project, node, ctx)


def domain_check(rules: tuple[DomainRule, ...]) -> FilterFunc:
    """The per-node check of `rules` (`topology_value`, inlined: this runs per node searched)."""

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        labels = node.labels
        for key, missing, refused, accepted, rejection in rules:
            value = labels.get(key)
            if value is None:
                if key != HOSTNAME_KEY:
                    if missing is not None:
                        return missing
                    continue
                value = node.name
            if refused is not None and value in refused:
                return rejection
            if accepted is not None and value not in accepted:
                return rejection
        return None

    return check


def merged(checks: tuple[FilterFunc, ...]) -> tuple[FilterFunc, ...]:
    """`checks` with each run of two or more `DomainCheck`s in a row replaced by one `DomainCheck` of all their
    rules, in order (the same first rejection on every node)."""
    out: list[FilterFunc] = []
    run: list[DomainCheck] = []
    for check in (*checks, None):
        if isinstance(check, DomainCheck):
            run.append(check)
            continue
        if len(run) > 1:
            out.append(DomainCheck(tuple(rule for each in run for rule in each.rules)))
        else:
            out.extend(run)
        run = []
        if check is not None:
            out.append(check)
    return tuple(out)


def domain_key(project: ProjectInfo, before: FilterFunc | None) -> str | None:
    """The one topology key that `before` (a search's checks ahead of the basic ones) and `project`'s preference
    plugins (`scores.scorer_parts`) read of a node, when they read nothing else of it and it is not the hostname:
    then their verdict on a node is its domain's, the same for every node with that value of the key (or without
    the key). None otherwise (node affinity preferences, selectors, hostname rules, several keys, nothing to read)."""
    placement = project.placement
    if placement.node_preferred:
        return None
    keys = {term.topology_key for _, term in placement.affinity_preferred}
    keys.update(term.topology_key for _, term in placement.anti_preferred)
    keys.update(constraint.topology_key for constraint in placement.spread if not constraint.hard)
    if before is not None:
        if not isinstance(before, DomainCheck):
            return None
        keys.update(rule[0] for rule in before.rules)
    if len(keys) != 1:
        return None
    (key,) = keys
    return None if key == HOSTNAME_KEY else key


def _domain_check(rules: list[DomainRule]) -> DomainCheck | None:
    return DomainCheck(tuple(rules)) if rules else None


def prepare_topology_labels(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """The node has the topology label of each DoNotSchedule spread constraint (infeasible when not)."""
    keys = sorted({c.topology_key for c in project.placement.spread if c.hard and c.topology_key != HOSTNAME_KEY})
    lacking = [
        (key, Rejection(f"node(s) lack topology label {short_key(key)}", True, RANK_TOPOLOGY_LABEL)) for key in keys
    ]
    return _domain_check([(key, rejection, None, None, rejection) for key, rejection in lacking])


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
    return _domain_check(
        [(key, _AFFINITY, None, None if first else counts.keys(), _AFFINITY) for key, counts in counted]
    )


def prepare_anti_affinity(project: ProjectInfo, ctx: FilterContext) -> FilterFunc | None:
    """Required anti-affinity: no placed project matching one of the project's terms in the node's domain, and no
    placed project whose own required anti-affinity matches this project there (a node without the topology
    label has no such domain and passes)."""
    topology = ctx.topology
    own = [(t.topology_key, topology.domain_counts(t)) for t in project.placement.anti_required]
    theirs = topology.anti_affinity_against(project.labels)
    return _domain_check(
        [(key, None, counts.keys(), None, _ANTI_AFFINITY) for key, counts in (*own, *theirs) if counts]
    )


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
            rules.append((key, None, refused, None, Rejection(reason, False, RANK_SPREAD)))
    return _domain_check(rules)


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
    "DomainCheck",
    "domain_key",
    "domain_check",
    "merged",
    "topology_labels_present",
]
