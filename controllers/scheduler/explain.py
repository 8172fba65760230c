"""The explanation of a binding: the chosen node's score by plugin against the runner-up's (`status.placementScores`).

Computed for two nodes per binding only (never per node searched), from `scores.score_parts`, on the state the
decision was made on: the reconciler calls it before assuming the binding, so the chosen node's total equals the
score the decision compared. The text is `caravanserai.project.decisions.scores_text` (the event and `describe`
share it).
"""

from __future__ import annotations

from collections.abc import Callable

from caravanserai import v1
from caravanserai.controllers.scheduler.algorithm import Decision, Policy
from caravanserai.controllers.scheduler.scores import parts_scorer
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.controllers.scheduler.topology import TopologyView


def node_scores(project: ProjectInfo, node: NodeInfo, policy: Policy, topology: TopologyView) -> v1.NodeScores:
    """`node`'s total score for `project` and its parts by plugin."""
    return _node_scores(
        node, parts_scorer(project, strategy=policy.strategy, weights=policy.weights, topology=topology)
    )


def _node_scores(node: NodeInfo, parts: Callable[[NodeInfo], list[tuple[str, float]]]) -> v1.NodeScores:
    out = v1.NodeScores(node=node.name)
    total = 0.0
    for plugin, score in parts(node):
        out.plugins.add(plugin=plugin, score=score)
        total += score
    out.total = total
    return out


def placement_scores(
    project: ProjectInfo,
    decision: Decision,
    node: Callable[[str], NodeInfo | None],
    *,
    policy: Policy,
    topology: TopologyView,
) -> v1.PlacementScores | None:
    """The scores of the decision's chosen node and runner-up (`node` looks a node up by name); None when the
    decision chose nothing or its node is unknown."""
    chosen = node(decision.node) if decision.node is not None else None
    if chosen is None:
        return None
    parts = parts_scorer(project, strategy=policy.strategy, weights=policy.weights, topology=topology)
    out = v1.PlacementScores(feasible=decision.feasible, searched=decision.visited)
    out.chosen.CopyFrom(_node_scores(chosen, parts))
    runner_up = node(decision.runner_up) if decision.runner_up is not None else None
    if runner_up is not None:
        out.runner_up.CopyFrom(_node_scores(runner_up, parts))
    return out


__all__ = ["node_scores", "placement_scores"]
