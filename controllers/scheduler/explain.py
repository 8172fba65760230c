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
from caravanserai.controllers.scheduler.scores import score_parts
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo
from caravanserai.controllers.scheduler.topology import TopologyView


def node_scores(project: ProjectInfo, node: NodeInfo, policy: Policy, topology: TopologyView) -> v1.NodeScores:
    """`node`'s total score for `project` and its parts by plugin."""
    out = v1.NodeScores(node=node.name)
    total = 0.0
    for plugin, score in score_parts(
        project, node, strategy=policy.strategy, weights=policy.weights, topology=topology
    ):
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
    out = v1.PlacementScores(feasible=decision.feasible, searched=decision.visited)
    out.chosen.CopyFrom(node_scores(project, chosen, policy, topology))
    runner_up = node(decision.runner_up) if decision.runner_up is not None else None
    if runner_up is not None:
        out.runner_up.CopyFrom(node_scores(project, runner_up, policy, topology))
    return out


__all__ = ["node_scores", "placement_scores"]
