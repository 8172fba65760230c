"""Scores: how good is this (feasible) node for this project? Pure functions returning 0…100.

* `least_allocated` (the default, "spread"): the share of cpu and memory left free after placing the project,
  averaged; `most_allocated` (`--strategy binpack`): the share used, averaged. As kube-scheduler's
  NodeResourcesFit strategies, they read requests, not usage; a resource the node does not declare scores 0.
* `start_delay`: advisory, how soon the project could start there: the estimated start delay t
  (`movecost.start_delay_seconds`: the bytes of the images the node lacks, at the sizes the nodes report, plus
  the snapshots it would restore, over its download rate — observed by its restores, else measured, else assumed)
  mapped to `100 · R / (R + t)` with R = `REFERENCE_PULL_SECONDS`: 100 when nothing is fetched, 50 at R seconds.
  Never a filter: the slowest node still scores above 0.
* `rpo`: advisory, whether the node keeps up with the project's backups: 100 when it uploads the bytes a backup
  adds within the shortest `every` (or when that is unknown), else `100 · every / upload time`
  (`movecost.rpo_margin`), never below `MIN_RPO_SCORE`. Never a filter.
* `prefer_no_schedule`: 100 without untolerated PreferNoSchedule taints, `100 / (1 + n)` with n of them.
* the project's preferences (`placementscores.py`): preferred node affinity, preferred project affinity and
  anti-affinity, ScheduleAnyway spread constraints; 0 for a project without them (so they change nothing then).

`score_parts` gives each plugin's weighted part (the explanation of a decision), `total_score` their sum.

`total_score` weighs them (`Weights`); the highest total wins and `tie_break_key` (a stable hash of project and
node name, then the node name) orders equal totals, so equal nodes share load across projects yet every
decision is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from caravanserai.controllers.scheduler import placementscores
from caravanserai.controllers.scheduler.filters import tolerated
from caravanserai.controllers.scheduler.resources import CPU, MEMORY
from caravanserai.controllers.scheduler.snapshot import PREFER_NO_SCHEDULE, NodeInfo, ProjectInfo, name_hash, shown
from caravanserai.controllers.scheduler.topology import EMPTY_TOPOLOGY, TopologyView
from caravanserai.project.movecost import bare_node_delay, rpo_margin, start_delay_function, start_delay_seconds

MAX_SCORE = 100.0
SCORED_RESOURCES = (CPU, MEMORY)
REFERENCE_PULL_SECONDS = 10.0
MIN_RPO_SCORE = 1.0

SPREAD = "spread"
BINPACK = "binpack"
STRATEGIES = (SPREAD, BINPACK)

ScoreFunc = Callable[[ProjectInfo, NodeInfo], float]
NodeScore = Callable[[NodeInfo], float]


def _scored_requests(project: ProjectInfo) -> tuple[tuple[str, int], ...]:
    """(resource, amount the project requests) for every scored resource."""
    return tuple((name, project.requests.get(name, 0)) for name in SCORED_RESOURCES)


def _mean_share_used(wanted: tuple[tuple[str, int], ...], node: NodeInfo) -> tuple[float, float]:
    """(mean share of cpu and memory used once the `wanted` amounts are placed, mean share declared by the node): a
    resource the node does not declare counts as neither used nor free. Shares are clamped to 0…1."""
    allocatable, requested = node.allocatable, node.requested
    used_total = declared = 0.0
    for name, amount in wanted:
        capacity = allocatable.get(name, 0)
        if capacity <= 0:
            continue
        declared += 1.0
        share = (requested.get(name, 0) + amount) / capacity
        used_total += 1.0 if share > 1.0 else (share if share > 0.0 else 0.0)
    count = len(SCORED_RESOURCES)
    return used_total / count, declared / count


def least_allocated(project: ProjectInfo, node: NodeInfo) -> float:
    """Spread: the mean share of cpu and memory still free once the project is placed (0…100)."""
    used, declared = _mean_share_used(_scored_requests(project), node)
    return MAX_SCORE * (declared - used)


def most_allocated(project: ProjectInfo, node: NodeInfo) -> float:
    """Bin-pack: the mean share of cpu and memory in use once the project is placed (0…100)."""
    return MAX_SCORE * _mean_share_used(_scored_requests(project), node)[0]


def start_delay(project: ProjectInfo, node: NodeInfo) -> float:
    """Advisory: 100 · R / (R + the estimated start delay on the node in seconds)."""
    return _delay_score(start_delay_seconds(project.needs, node))


def _delay_score(seconds: float) -> float:
    return MAX_SCORE * REFERENCE_PULL_SECONDS / (REFERENCE_PULL_SECONDS + seconds)


def rpo(project: ProjectInfo, node: NodeInfo) -> float:
    """Advisory: 100 when the node keeps up with the project's backups, else 100 · every / upload time, at
    least MIN_RPO_SCORE."""
    return max(MIN_RPO_SCORE, MAX_SCORE * rpo_margin(project.needs, node))


def prefer_no_schedule(project: ProjectInfo, node: NodeInfo) -> float:
    """100 / (1 + the number of PreferNoSchedule taints the project does not tolerate)."""
    count = sum(1 for t in node.taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(project, t))
    return MAX_SCORE / (1 + count)


@dataclass(frozen=True, slots=True)
class Weights:
    """Weights of the scores in the total (kube-scheduler's defaults: taints 3, resources 1, image 1). `pull`
    weighs the start-delay score (it grew from the image-pull score and keeps its name), `rpo` the RPO score."""

    resources: float = 2.0
    taints: float = 3.0
    pull: float = 1.0
    rpo: float = 1.0
    node_affinity: float = 2.0
    project_affinity: float = 2.0
    spread: float = 2.0


def resource_score(strategy: str) -> ScoreFunc:
    """The resource score of a strategy: `spread` → least_allocated, `binpack` → most_allocated."""
    if strategy == SPREAD:
        return least_allocated
    if strategy == BINPACK:
        return most_allocated
    raise ValueError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")


RESOURCES, TAINTS, START_DELAY, RPO = "resources", "taints", "start-delay", "rpo"
NODE_AFFINITY, PROJECT_AFFINITY, TOPOLOGY_SPREAD = "node-affinity", "project-affinity", "spread"


def score_parts(
    project: ProjectInfo,
    node: NodeInfo,
    *,
    strategy: str = SPREAD,
    weights: Weights = Weights(),
    topology: TopologyView = EMPTY_TOPOLOGY,
) -> list[tuple[str, float]]:
    """Each plugin's weighted part of the score of `project` on `node`, in the order `total_score` adds them; the
    preference plugins only when the project has such preferences."""
    return parts_scorer(project, strategy=strategy, weights=weights, topology=topology)(node)


def parts_scorer(
    project: ProjectInfo,
    *,
    strategy: str = SPREAD,
    weights: Weights = Weights(),
    topology: TopologyView = EMPTY_TOPOLOGY,
) -> Callable[[NodeInfo], list[tuple[str, float]]]:
    """`score_parts` of `project` as a function of the node alone, the preference plugins prepared once (for
    explaining a decision on a few nodes)."""
    resources, preferences = resource_score(strategy), _preferences(project, weights, topology)

    def parts(node: NodeInfo) -> list[tuple[str, float]]:
        return [
            (RESOURCES, weights.resources * resources(project, node)),
            (TAINTS, weights.taints * (prefer_no_schedule(project, node) if node.taints else MAX_SCORE)),
            (START_DELAY, weights.pull * start_delay(project, node)),
            (RPO, weights.rpo * rpo(project, node)),
            *((name, weight * score(node)) for name, weight, score in preferences),
        ]

    return parts


def total_score(
    project: ProjectInfo,
    node: NodeInfo,
    *,
    strategy: str = SPREAD,
    weights: Weights = Weights(),
    topology: TopologyView = EMPTY_TOPOLOGY,
) -> float:
    """The weighted sum of every score for placing `project` on `node`."""
    total = 0.0
    for _, part in score_parts(project, node, strategy=strategy, weights=weights, topology=topology):
        total += part
    return total


def _preferences(
    project: ProjectInfo, weights: Weights, topology: TopologyView
) -> list[tuple[str, float, Callable[[NodeInfo], float]]]:
    """(plugin, weight, per-node score) of the preference plugins that apply to `project`, for one decision."""
    out: list[tuple[str, float, Callable[[NodeInfo], float]]] = []
    if project.placement.node_preferred:
        out.append((NODE_AFFINITY, weights.node_affinity, lambda node: placementscores.node_affinity(project, node)))
    affinity = placementscores.prepare_project_affinity(project, topology)
    if affinity is not None:
        out.append((PROJECT_AFFINITY, weights.project_affinity, affinity))
    spread = placementscores.prepare_spread(project, topology)
    if spread is not None:
        out.append((TOPOLOGY_SPREAD, weights.spread, spread))
    return out


def scorer_parts(
    project: ProjectInfo,
    *,
    strategy: str = SPREAD,
    weights: Weights = Weights(),
    topology: TopologyView = EMPTY_TOPOLOGY,
) -> tuple[NodeScore, list[tuple[float, NodeScore]]]:
    """`total_score` of `project` as a function of the node alone, for one decision over many nodes: the same
    value for every node (same operations in the same order), with what depends only on the project, the
    strategy and the weights worked out once, `_mean_share_used` unrolled for its two resources, and the taint
    score of a node without taints, the start-delay score of a node without images and measured download rate
    (for a project that restores nothing) and the RPO score of a project with nothing to upload taken as the
    constants they are; the preference plugins are prepared once (their counts looked up once) and added last:
    (the base score, [(weight, preference score)]), `total_score` being the base plus each weighted preference in
    turn. `tests/unit/controllers/test_scheduler_scores.py` checks the equality on every kind of node."""
    resource_score(strategy)  # refuses an unknown strategy
    spread = strategy == SPREAD
    (cpu, cpu_wanted), (memory, memory_wanted) = _scored_requests(project)  # `_mean_share_used`, unrolled below
    w_resources, w_taints, w_pull, w_rpo = weights.resources, weights.taints, weights.pull, weights.rpo
    untainted = w_taints * MAX_SCORE
    delay_of = start_delay_function(project.needs)
    reference, pull_top = REFERENCE_PULL_SECONDS, MAX_SCORE * REFERENCE_PULL_SECONDS  # as `_delay_score` computes
    bare = bare_node_delay(project.needs)  # one start delay for every node without images and measured rate
    bare_score = None if bare is None else w_pull * (pull_top / (reference + bare))
    uploads = bool(project.needs.rpo_bytes) and project.needs.shortest_every is not None
    keeps_up = w_rpo * MAX_SCORE

    def score(node: NodeInfo) -> float:
        allocatable, requested = node.allocatable, node.requested
        used = declared = 0.0
        capacity = allocatable.get(cpu, 0)
        if capacity > 0:
            declared += 1.0
            share = (requested.get(cpu, 0) + cpu_wanted) / capacity
            used += 1.0 if share > 1.0 else (share if share > 0.0 else 0.0)
        capacity = allocatable.get(memory, 0)
        if capacity > 0:
            declared += 1.0
            share = (requested.get(memory, 0) + memory_wanted) / capacity
            used += 1.0 if share > 1.0 else (share if share > 0.0 else 0.0)
        used, declared = used / 2, declared / 2
        total = w_resources * (MAX_SCORE * (declared - used) if spread else MAX_SCORE * used)
        total += w_taints * prefer_no_schedule(project, node) if node.taints else untainted
        if bare_score is not None and not node.images and node.download is None:
            total += bare_score
        else:
            total += w_pull * (pull_top / (reference + delay_of(node)))
        return total + (w_rpo * rpo(project, node) if uploads else keeps_up)

    return score, [(weight, function) for _, weight, function in _preferences(project, weights, topology)]


def scorer(
    project: ProjectInfo,
    *,
    strategy: str = SPREAD,
    weights: Weights = Weights(),
    topology: TopologyView = EMPTY_TOPOLOGY,
) -> NodeScore:
    """`total_score` of `project` as a function of the node alone, for one decision over many nodes (see
    `scorer_parts`): the base score, then each preference plugin's weighted part added in turn."""
    return with_preferences(*scorer_parts(project, strategy=strategy, weights=weights, topology=topology))


def with_preferences(score: NodeScore, preferences: list[tuple[float, NodeScore]]) -> NodeScore:
    """`score` plus each weighted preference in turn (`scorer` from `scorer_parts`)."""
    if not preferences:
        return score
    if len(preferences) == 1:  # the usual case, without the loop (the same sum)
        ((weight, function),) = preferences

        def with_one(node: NodeInfo) -> float:
            return score(node) + weight * function(node)

        return with_one

    def with_all(node: NodeInfo) -> float:
        total = score(node)
        for weight, function in preferences:
            total += weight * function(node)
        return total

    return with_all


def tie_break_key(project_name: str, node_name: str) -> tuple[int, str]:
    """Orders nodes of equal score: a stable hash of the node name mixed with one of the project name (lower
    first: each project sees the nodes in its own fixed order), then the node name. (A search reads the node's
    hash from `NodeInfo.name_hash`, the same `name_hash`; the project is hashed as `shown`, so a project of
    `default` keeps the order it had before namespaces.)"""
    return name_hash(node_name) ^ name_hash(shown(project_name)), node_name


__all__ = [
    "NODE_AFFINITY",
    "PROJECT_AFFINITY",
    "RESOURCES",
    "RPO",
    "START_DELAY",
    "TAINTS",
    "TOPOLOGY_SPREAD",
    "parts_scorer",
    "score_parts",
    "BINPACK",
    "MAX_SCORE",
    "MIN_RPO_SCORE",
    "NodeScore",
    "REFERENCE_PULL_SECONDS",
    "SCORED_RESOURCES",
    "SPREAD",
    "STRATEGIES",
    "ScoreFunc",
    "Weights",
    "least_allocated",
    "most_allocated",
    "prefer_no_schedule",
    "resource_score",
    "rpo",
    "scorer",
    "scorer_parts",
    "with_preferences",
    "start_delay",
    "tie_break_key",
    "total_score",
]
