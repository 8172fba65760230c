"""One scheduling decision: filter a capped sample of nodes, score the feasible ones, pick the best.

Guarantees (kube-scheduler's `schedule_one`, in Python and over `NodeInfo` records):

* **Capped work.** With fewer than `MIN_FEASIBLE_NODES_TO_FIND` (100) nodes every node is considered. With more,
  the search stops once `nodes_to_find(N)` feasible nodes are found: `max(5, 50 − N/125)` % of N, never fewer
  than 100 (1 000 nodes → 420; 5 000 → 500). The search starts where the previous one stopped (`start`, rotated
  by the caller with `Decision.visited`), so every node gets its turn and a sample never starves the others.
* **Complete when it fails.** When no node passes, every node was checked, so the `Diagnosis` counts every node
  once, under the first filter that refused it.
* **Only what can matter.** A filter that passes every node for the project (`Filter.needed`) is left out, and
  the score's project-only arithmetic is done once (`scores.scorer`, equal to `total_score` for every node).
* **Deterministic.** The same nodes, start and project give the same node.
* **Pure.** Nothing here awaits or changes its inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from caravanserai.controllers.scheduler.filters import FILTERS, Filter, FilterContext, Rejection, checks_for
from caravanserai.controllers.scheduler.scores import SPREAD, Weights, scorer, tie_break_key
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50


def nodes_to_find(total: int, percentage: int = 0) -> int:
    """How many feasible nodes to find among `total` before choosing (kube-scheduler's numFeasibleNodesToFind).

    `percentage` 0 means adaptive: 50 − total/125, at least 5. The result is never below 100 (nor above total).
    """
    if total < MIN_FEASIBLE_NODES_TO_FIND:
        return total
    adaptive = percentage or max(MIN_FEASIBLE_NODES_PERCENTAGE, BASE_PERCENTAGE_OF_NODES_TO_SCORE - total // 125)
    if adaptive >= 100:
        return total
    return min(total, max(MIN_FEASIBLE_NODES_TO_FIND, total * adaptive // 100))


@dataclass(slots=True)
class Diagnosis:
    """Why no node was chosen: how many nodes each rejection refused, of `total` nodes."""

    total: int
    rejections: dict[Rejection, int] = field(default_factory=dict)

    @property
    def infeasible(self) -> int:
        """Nodes that can never take the project."""
        return sum(count for rejection, count in self.rejections.items() if rejection.infeasible)

    def message(self) -> str:
        """`0/5 nodes are available: 2 NotReady, 1 unschedulable, 2 insufficient memory.` plus, when it applies,
        how many nodes can never fit the project (all of them: "No node can ever fit this project (infeasible).")."""
        if self.total == 0:
            return "0/0 nodes are available: no nodes are registered."
        counts: dict[tuple[int, str], int] = {}
        for rejection, count in self.rejections.items():
            key = (rejection.rank, rejection.reason)
            counts[key] = counts.get(key, 0) + count
        parts = ", ".join(f"{count} {reason}" for (_, reason), count in sorted(counts.items()))
        text = f"0/{self.total} nodes are available: {parts}."
        infeasible = self.infeasible
        if infeasible == self.total:
            return text + " No node can ever fit this project (infeasible)."
        if infeasible:
            return text + f" {infeasible} of them can never fit it (infeasible); the others may free up."
        return text


@dataclass(frozen=True, slots=True)
class Decision:
    """The chosen node (None when none fits, then `diagnosis` says why), its score, and how many nodes were
    looked at (the caller starts the next search that many nodes further)."""

    node: str | None
    score: float = 0.0
    visited: int = 0
    feasible: int = 0
    diagnosis: Diagnosis | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    """The knobs of a decision: resource strategy, score weights, sampling percentage (0 = adaptive), filters."""

    strategy: str = SPREAD
    weights: Weights = Weights()
    percentage_of_nodes_to_score: int = 0
    filters: tuple[Filter, ...] = FILTERS


def schedule(
    project: ProjectInfo,
    nodes: Sequence[NodeInfo],
    ctx: FilterContext,
    *,
    start: int = 0,
    policy: Policy = Policy(),
) -> Decision:
    """Choose a node for `project` among `nodes`, searching from index `start` (see the module docstring)."""
    total = len(nodes)
    wanted = nodes_to_find(total, policy.percentage_of_nodes_to_score)
    checks = checks_for(project, policy.filters)  # the filters this project can fail, in order
    score_of = scorer(project, strategy=policy.strategy, weights=policy.weights)
    rejections: dict[Rejection, int] = {}
    best: NodeInfo | None = None
    best_score = -1.0
    best_key: tuple[int, str] | None = None  # the tie-break key of `best`, computed on the first tie
    feasible = visited = 0
    start = start % total if total else 0
    for node in itertools.chain(itertools.islice(nodes, start, None), itertools.islice(nodes, 0, start)):
        visited += 1
        for check in checks:
            rejection = check(project, node, ctx)
            if rejection is not None:
                rejections[rejection] = rejections.get(rejection, 0) + 1
                break
        else:
            feasible += 1
            score = score_of(node)
            if best is None or score > best_score:
                best, best_score, best_key = node, score, None
            elif score == best_score:
                if best_key is None:
                    best_key = tie_break_key(project.name, best.name)
                key = tie_break_key(project.name, node.name)
                if key < best_key:
                    best, best_key = node, key
            if feasible >= wanted:
                break
    if best is None:
        return Decision(None, visited=visited, diagnosis=Diagnosis(total, rejections))
    return Decision(best.name, best_score, visited, feasible)


__all__ = [
    "BASE_PERCENTAGE_OF_NODES_TO_SCORE",
    "Decision",
    "Diagnosis",
    "MIN_FEASIBLE_NODES_PERCENTAGE",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Policy",
    "nodes_to_find",
    "schedule",
]
