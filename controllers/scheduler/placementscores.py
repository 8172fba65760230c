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
`prepare_*` functions look the counts up once per decision and return a per-node function (None: the project has
no such preference, the score is 0 everywhere).
"""

from __future__ import annotations

from collections.abc import Callable

from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.controllers.scheduler.topology import TopologyView, least_loaded, node_rules
from caravanserai.project.affinity import HOSTNAME_KEY, topology_value

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


def prepare_project_affinity(project: ProjectInfo, topology: TopologyView) -> NodeScore | None:
    """The preferred project affinity and anti-affinity score of one decision (see the module docstring)."""
    placement = project.placement
    terms = [(weight, term, True) for weight, term in placement.affinity_preferred]
    terms += [(weight, term, False) for weight, term in placement.anti_preferred]
    if not terms:
        return None
    total = float(sum(weight for weight, _, _ in terms))
    looked_up = [(w / total, term.topology_key, topology.domain_counts(term), near) for w, term, near in terms]

    def score(node: NodeInfo) -> float:
        value = 0.0
        labels = node.labels
        for share, key, counts, near in looked_up:
            domain = labels.get(key)  # `topology_value`, inlined: this runs per node searched
            if domain is None and key == HOSTNAME_KEY:
                domain = node.name
            count = 0 if domain is None else counts.get(domain, 0)
            if near:
                value += share * (count / (count + 1) if domain is not None else 0.0)
            else:
                value += share / (count + 1)
        return MAX_SCORE * value

    return score


def prepare_spread(project: ProjectInfo, topology: TopologyView) -> NodeScore | None:
    """The ScheduleAnyway spread score of one decision (see the module docstring)."""
    soft = [c for c in project.placement.spread if not c.hard]
    if not soft:
        return None
    eligible = node_rules(project)
    looked_up = []
    for constraint in soft:
        counts = topology.domain_counts(constraint.term)
        least = least_loaded(counts, topology.domains(constraint.topology_key, eligible))
        looked_up.append((constraint.topology_key, counts, least))
    share = 1.0 / len(looked_up)

    def score(node: NodeInfo) -> float:
        value = 0.0
        for key, counts, least in looked_up:
            domain = topology_value(node.name, node.labels, key)
            if domain is not None:
                value += share / (1 + max(0, counts.get(domain, 0) - least))
        return MAX_SCORE * value

    return score


__all__ = ["MAX_SCORE", "node_affinity", "prepare_project_affinity", "prepare_spread"]
