"""Scores of a project's preferences (`caravanserai.project.affinity`): pure, 0…100 per node, 0 without preferences.

* `node_affinity`: 100 · the weights of the preferred node terms the node matches / the weights of all of them.
* project affinity (`prepare_project_affinity`): per preferred term, with c the matching placed projects in the
  node's domain, affinity counts c / (c + 1) (closer to 1 the more are near), anti-affinity 1 / (c + 1) (1 when
  none is near); a node without the topology label counts 0 for affinity and 1 for anti-affinity. The score is
  100 · the weighted mean.
* spread (`prepare_spread`, ScheduleAnyway constraints): per constraint, with c the matching projects in the
  node's domain and m those in the least loaded domain, 1 / (1 + c − m) (1 in a least loaded domain); 0 on a node
  without the topology label. The score is 100 · the mean.

Every score reads other projects only through a `TopologyView` (the live index or a what-if view). The
`prepare_*` functions look the counts up once per decision, sum the terms' parts per domain of each topology key
once (so a node costs one label and one table lookup per key, whatever the number of terms and placed projects)
and return a per-node function (None: the project has no such preference, the score is 0 everywhere).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.controllers.scheduler.topology import TopologyView, least_loaded, node_rules
from caravanserai.project.affinity import HOSTNAME_KEY

MAX_SCORE = 100.0
NodeScore = Callable[[NodeInfo], float]


def node_affinity(project: ProjectInfo, node: NodeInfo) -> float:
    """100 · matched preferred weights / all preferred weights (0 without preferred node terms)."""
    preferred = project.placement.node_preferred
    if not preferred:
        return 0.0
    labels = node.labels
    matched = sum(weight for weight, term in preferred if term.matches(labels))
    return MAX_SCORE * matched / sum(weight for weight, _ in preferred)


DomainTable = tuple[str, dict[str, float], float, float]
"""(topology key, domain → score part there, part in a domain absent from the table, part without the label)."""


def _per_domain(key: str, parts: list[tuple[Mapping[str, int], Callable[[int], float], float]]) -> DomainTable:
    """The summed parts of the terms over one topology key, per domain, computed once per decision: each term is
    (domain → count, part of a count, part without the label); a domain with no count has the parts of 0."""
    domains: set[str] = set()
    for counts, _, _ in parts:
        domains.update(counts)
    table = {domain: sum(part(counts.get(domain, 0)) for counts, part, _ in parts) for domain in domains}
    return key, table, sum(part(0) for _, part, _ in parts), sum(absent for _, _, absent in parts)


def _domain_score(tables: list[DomainTable]) -> NodeScore:
    """100 · the sum over `tables` of the node's part (`topology_value`, inlined: this runs per node searched; one
    table, the usual case, without the loop: 0.0 plus a part is that part)."""
    if len(tables) == 1:
        ((key, table, empty, absent),) = tables
        hostname = key == HOSTNAME_KEY

        def one(node: NodeInfo) -> float:
            domain = node.labels.get(key)
            if domain is None and hostname:
                domain = node.name
            return MAX_SCORE * (absent if domain is None else table.get(domain, empty))

        return one

    def score(node: NodeInfo) -> float:
        value = 0.0
        labels = node.labels
        for key, table, empty, absent in tables:
            domain = labels.get(key)
            if domain is None and key == HOSTNAME_KEY:
                domain = node.name
            value += absent if domain is None else table.get(domain, empty)
        return MAX_SCORE * value

    return score


def _grouped(
    terms: list[tuple[str, Mapping[str, int], Callable[[int], float], float]],
) -> list[DomainTable]:
    by_key: dict[str, list[tuple[Mapping[str, int], Callable[[int], float], float]]] = {}
    for key, counts, part, absent in terms:
        by_key.setdefault(key, []).append((counts, part, absent))
    return [_per_domain(key, parts) for key, parts in by_key.items()]


def _near(share: float) -> Callable[[int], float]:
    return lambda count: share * (count / (count + 1))


def _apart(share: float) -> Callable[[int], float]:
    return lambda count: share / (count + 1)


def prepare_project_affinity(project: ProjectInfo, topology: TopologyView) -> NodeScore | None:
    """The preferred project affinity and anti-affinity score of one decision (see the module docstring), from
    per-domain parts worked out once (one label and one table lookup per node and topology key)."""
    placement = project.placement
    terms = [(weight, term, True) for weight, term in placement.affinity_preferred]
    terms += [(weight, term, False) for weight, term in placement.anti_preferred]
    if not terms:
        return None
    total = float(sum(weight for weight, _, _ in terms))
    return _domain_score(
        _grouped(
            [
                (term.topology_key, topology.domain_counts(term), _near(w / total) if near else _apart(w / total),
                 0.0 if near else w / total)
                for w, term, near in terms
            ]
        )
    )  # fmt: skip


def prepare_spread(project: ProjectInfo, topology: TopologyView) -> NodeScore | None:
    """The ScheduleAnyway spread score of one decision (see the module docstring), from per-domain parts worked
    out once."""
    soft = [c for c in project.placement.spread if not c.hard]
    if not soft:
        return None
    eligible = node_rules(project)
    share = 1.0 / len(soft)
    terms: list[tuple[str, Mapping[str, int], Callable[[int], float], float]] = []
    for constraint in soft:
        counts = topology.domain_counts(constraint.term)
        least = least_loaded(counts, topology.domains(constraint.topology_key, eligible))
        terms.append((constraint.topology_key, counts, _skewed(share, least), 0.0))
    return _domain_score(_grouped(terms))


def _skewed(share: float, least: int) -> Callable[[int], float]:
    return lambda count: share / (1 + max(0, count - least))


__all__ = ["MAX_SCORE", "node_affinity", "prepare_project_affinity", "prepare_spread"]
