"""One scheduling decision: filter a capped sample of nodes, score the feasible ones, pick the best.

Guarantees (kube-scheduler's `schedule_one`, in Python and over `NodeInfo` records):

* **Capped work.** With fewer than `MIN_FEASIBLE_NODES_TO_FIND` (100) nodes every node is considered. With more,
  the search stops once `nodes_to_find(N)` feasible nodes are found: `max(5, 50 − N/125)` % of N, never fewer
  than 100 (1 000 nodes → 420; 5 000 → 500). The search starts where the previous one stopped (`start`, rotated
  by the caller with `Decision.visited`), so every node gets its turn and a sample never starves the others.
* **Complete when it fails.** When no node passes, every node was checked, so the `Diagnosis` counts every node
  once, under the first filter that refused it.
* **Only what can matter.** A filter that passes every node for the project (`Filter.needed`) is left out, the
  inter-project filters and scores look their counts up once (`Filter.prepare`, from `ctx.topology`), and the
  score's project-only arithmetic is done once (`scores.scorer`, equal to `total_score` for every node). The
  node-local filters are one call per node (`nodegate.fuse`), and what they and the base score work out about a
  node the cluster state keeps is remembered per kind of project until the node changes (`nodememo.py`): the
  same verdicts and scores, without working them out again for the nodes no binding touched since.
* **Cheap refusals first.** The filters that decide by topology domain (`Filter.by_domain`) run before the
  per-node ones (`filters.search_checks`): a node passes all of them in either order, so the chosen node, the
  runner-up and the counts are the same; only when no node passes is the search run again in the order of
  `policy.filters`, so that the `Diagnosis` counts each node under the first filter of that order.
* **Deterministic.** The same nodes, start and project give the same node, and the same runner-up: the highest
  score among the other feasible nodes searched (of equal ones, the first met or the one the chosen displaced).
* **A move goes elsewhere.** A project that a move took off a node (`ProjectInfo.leaving`, from
  `status.previousNodeRef`) is placed on the best other feasible node; on that node again only when no other fits.
* **Pure.** Nothing here awaits or changes its inputs, except the nodes' memo (`NodeInfo.memo`), which changes no
  outcome.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from caravanserai.controllers.scheduler.filters import (
    FILTERS,
    Filter,
    FilterContext,
    FilterFunc,
    Rejection,
    search_checks,
)
from caravanserai.controllers.scheduler.nodegate import fuse
from caravanserai.controllers.scheduler.nodememo import Evaluate, check_then_score, kind_of, memo_evaluate, split_basics
from caravanserai.controllers.scheduler.placementfilters import merged
from caravanserai.controllers.scheduler.scores import SPREAD, Weights, scorer_parts, with_preferences
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, name_hash, shown

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
    """The chosen node (None when none fits, then `diagnosis` says why), its score, how many nodes were looked
    at (the caller starts the next search that many nodes further), and the runner-up (the best other feasible
    node searched; None when there was only one) with its score."""

    node: str | None
    score: float = 0.0
    visited: int = 0
    feasible: int = 0
    diagnosis: Diagnosis | None = None
    runner_up: str | None = None
    runner_up_score: float = 0.0


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
    start = start % total if total else 0
    score, preferences = scorer_parts(project, strategy=policy.strategy, weights=policy.weights, topology=ctx.topology)
    in_search_order, canonical = search_checks(project, policy.filters, ctx)
    reordered = in_search_order is not canonical
    in_search_order = merged(in_search_order)  # domain checks in a row: one call per node
    before = split_basics(in_search_order)
    if before is not None:  # what the filters and score work out per node is remembered between decisions
        kind = kind_of(project, policy.strategy, policy.weights)
        evaluate = memo_evaluate(project, ctx, first_of(before) if before else None, score, preferences, kind)
    else:
        evaluate = check_then_score(
            project, ctx, first_of(fuse(project, in_search_order, ctx)), with_preferences(score, preferences)
        )
    wanted = nodes_to_find(total, policy.percentage_of_nodes_to_score)
    search = _Search(project, evaluate)
    search.run(_rotated(nodes, start), wanted=wanted)
    best, second, best_score, second_score = search.best, search.second, search.best_score, search.second_score
    if best is None:
        if reordered:  # count every node under its first refusal in canonical order
            check = first_of(fuse(project, merged(canonical), ctx))
            search = _Search(project, check_then_score(project, ctx, check, with_preferences(score, preferences)))
            search.run(_rotated(nodes, start), wanted=wanted)
        return Decision(None, visited=search.visited, diagnosis=Diagnosis(total, search.rejections))
    if second is not None and best.name == project.leaving:  # a moved project goes elsewhere when it can
        best, second, best_score, second_score = second, best, second_score, best_score
    return Decision(
        best.name,
        best_score,
        search.visited,
        search.feasible,
        runner_up=None if second is None else second.name,
        runner_up_score=second_score if second is not None else 0.0,
    )


def _rotated(nodes: Sequence[NodeInfo], start: int) -> Iterable[NodeInfo]:
    return itertools.chain(itertools.islice(nodes, start, None), itertools.islice(nodes, 0, start))


@dataclass(slots=True)
class _Search:
    """One search over nodes in order: filters each, scores the feasible ones, counts the rejections, and stops
    once `wanted` feasible nodes were found. `best` is the highest score, equal scores ordered by
    `tie_break_key` (computed only on a tie with the best); `second` the highest score among the others (on equal
    scores the one met first, or the one the best displaced)."""

    project: ProjectInfo
    evaluate: Evaluate  # a node's first rejection, or its score
    rejections: dict[Rejection, int] = field(default_factory=dict)
    feasible: int = 0
    visited: int = 0
    best: NodeInfo | None = None
    best_score: float = -1.0
    second: NodeInfo | None = None
    second_score: float = -1.0

    def run(self, nodes: Iterable[NodeInfo], *, wanted: int) -> None:
        project, evaluate, rejections = self.project, self.evaluate, self.rejections
        project_hash = name_hash(shown(project.name))  # a default project's name: the order it always had
        best: NodeInfo | None = None
        second: NodeInfo | None = None
        best_hash = -1  # the first part of `best`'s tie-break key (computed on the first tie; keys are >= 0)
        best_score = second_score = -1.0
        feasible = visited = 0
        # Rejections are counted in runs of the same (interned) one, which neighbouring nodes mostly share.
        last: Rejection | None = None
        run = 0
        for node in nodes:
            visited += 1
            result = evaluate(node)
            if result.__class__ is Rejection:  # (not `isinstance`: a call per node; Rejection has no subclasses)
                if result is last:
                    run += 1
                else:
                    if last is not None:
                        rejections[last] = rejections.get(last, 0) + run
                    last, run = result, 1
                continue
            score: float = result  # type: ignore[assignment]  # not a Rejection: a score
            feasible += 1
            if best is None or score > best_score:
                second, second_score = best, best_score
                best, best_score, best_hash = node, score, -1
            elif score == best_score:  # the lower `tie_break_key` (hash, then name) wins
                if best_hash < 0:
                    best_hash = best.name_hash ^ project_hash
                tie_hash = node.name_hash ^ project_hash
                if tie_hash < best_hash or (tie_hash == best_hash and node.name < best.name):
                    second, second_score = best, best_score
                    best, best_hash = node, tie_hash
                elif second_score < score:
                    second, second_score = node, score
            elif score > second_score:
                second, second_score = node, score
            if feasible >= wanted:
                break
        if last is not None:
            rejections[last] = rejections.get(last, 0) + run
        self.feasible, self.visited = feasible, visited
        self.best, self.best_score, self.second, self.second_score = best, best_score, second, second_score


def first_of(checks: tuple[FilterFunc, ...]) -> FilterFunc:
    """One check that returns the first rejection of `checks` in order (None when the node passes them all): the
    only check itself when there is one, so that a search calls one function per node (two or three written out,
    without a loop)."""
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks

        def both(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
            rejection = first(project, node, ctx)
            return rejection if rejection is not None else second(project, node, ctx)

        return both
    if len(checks) == 3:
        first, second, third = checks

        def three(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
            rejection = first(project, node, ctx)
            if rejection is None:
                rejection = second(project, node, ctx)
            return rejection if rejection is not None else third(project, node, ctx)

        return three

    def check(project: ProjectInfo, node: NodeInfo, ctx: FilterContext) -> Rejection | None:
        for each in checks:
            rejection = each(project, node, ctx)
            if rejection is not None:
                return rejection
        return None

    return check


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
