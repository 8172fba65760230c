"""How a scheduling decision reads: the chosen node's score by plugin against the runner-up's, and a project's
placement rules, in one line each. The scheduler writes `status.placementScores` and puts `scores_text` in the
Scheduled event; `caractrl describe project` prints the same text from the status, so both say the same.

    node-b 612.4 (resources 150.2, taints 300, start-delay 100, rpo 100, project-affinity 62.2)
      vs runner-up node-a 540.1 (resources 140, taints 300, start-delay 100, rpo 100, project-affinity 0);
      420 feasible of 420 searched

(the event and `describe` keep it on one line; the break here is for the docstring). Totals and parts are
rounded to one decimal; a part that is a whole number shows none.
"""

from __future__ import annotations

from caravanserai import v1
from caravanserai.project.affinity import Placement, ProjectTerm, SpreadConstraint


def _figure(value: float) -> str:
    return f"{round(value, 1):g}"


def node_scores_text(scores: v1.NodeScores) -> str:
    """`node-b 612.4 (resources 150.2, taints 300, …)`."""
    parts = ", ".join(f"{p.plugin} {_figure(p.score)}" for p in scores.plugins)
    return f"{scores.node} {_figure(scores.total)} ({parts})"


def scores_text(scores: v1.PlacementScores) -> str:
    """The chosen node's scores, " vs runner-up …" when there was one, then how many nodes were feasible of
    those searched."""
    text = node_scores_text(scores.chosen)
    if scores.HasField("runner_up"):
        text += f" vs runner-up {node_scores_text(scores.runner_up)}"
    return f"{text}; {scores.feasible} feasible of {scores.searched} searched"


def _term_text(term: ProjectTerm) -> str:
    return f"{term.selector} per {term.topology_key}"


def _spread_text(constraint: SpreadConstraint) -> str:
    c = constraint
    return f"maxSkew {c.max_skew} per {c.topology_key} of {c.selector} ({c.when_unsatisfiable})"


def placement_lines(placement: Placement) -> list[tuple[str, str]]:
    """(label, text) for every kind of rule the project has, for `describe`."""
    lines: list[tuple[str, str]] = []
    if placement.node_required:
        terms = " OR ".join(" AND ".join(str(r) for r in t.requirements) for t in placement.node_required)
        lines.append(("Node Affinity (required)", terms))
    if placement.node_preferred:
        terms = "; ".join(f"{w}: " + " AND ".join(str(r) for r in t.requirements) for w, t in placement.node_preferred)
        lines.append(("Node Affinity (preferred)", terms))
    for label, required, preferred in (
        ("Project Affinity", placement.affinity_required, placement.affinity_preferred),
        ("Project Anti-Affinity", placement.anti_required, placement.anti_preferred),
    ):
        if required:
            lines.append((f"{label} (required)", "; ".join(_term_text(t) for t in required)))
        if preferred:
            lines.append((f"{label} (preferred)", "; ".join(f"{w}: {_term_text(t)}" for w, t in preferred)))
    if placement.spread:
        lines.append(("Topology Spread", "; ".join(_spread_text(c) for c in placement.spread)))
    return lines


__all__ = ["node_scores_text", "placement_lines", "scores_text"]
