"""Scores: how good is this (feasible) node for this project? Pure functions returning 0…100.

* `least_allocated` (the default, "spread"): the share of cpu and memory left free after placing the project,
  averaged; `most_allocated` (`--strategy binpack`): the share used, averaged. As kube-scheduler's
  NodeResourcesFit strategies, they read requests, not usage; a resource the node does not declare scores 0.
* `pull_speed`: advisory, from the measured download rate (`status.network.throughput.download`): the estimated
  time to pull the project's images (`ASSUMED_IMAGE_BYTES` per distinct image, sizes are not known before the
  pull) mapped to `100 · R / (R + t)` with R = `REFERENCE_PULL_SECONDS`. An unmeasured node scores as one that
  pulls in R seconds (50), so measuring never hurts a node and not measuring never excludes one. Never a filter.
* `prefer_no_schedule`: 100 without untolerated PreferNoSchedule taints, `100 / (1 + n)` with n of them.

`total_score` weighs them (`Weights`); the highest total wins and `tie_break_key` (a stable hash of project and
node name, then the node name) orders equal totals, so equal nodes share load across projects yet every
decision is reproducible.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from caravanserai.controllers.scheduler.filters import tolerated
from caravanserai.controllers.scheduler.resources import CPU, MEMORY
from caravanserai.controllers.scheduler.snapshot import PREFER_NO_SCHEDULE, NodeInfo, ProjectInfo

MAX_SCORE = 100.0
SCORED_RESOURCES = (CPU, MEMORY)
ASSUMED_IMAGE_BYTES = 200 * 1024 * 1024
REFERENCE_PULL_SECONDS = 10.0

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


def estimated_pull_seconds(project: ProjectInfo, node: NodeInfo) -> float | None:
    """Seconds to pull the project's images at the node's measured download rate; None when unmeasured."""
    if node.download is None or node.download <= 0:
        return None
    return max(1, len(project.images)) * ASSUMED_IMAGE_BYTES / node.download


def pull_speed(project: ProjectInfo, node: NodeInfo) -> float:
    """Advisory: 100 · R / (R + estimated pull seconds); 50 for an unmeasured node."""
    seconds = estimated_pull_seconds(project, node)
    return _pull_score(REFERENCE_PULL_SECONDS if seconds is None else seconds)


def _pull_score(seconds: float) -> float:
    return MAX_SCORE * REFERENCE_PULL_SECONDS / (REFERENCE_PULL_SECONDS + seconds)


def prefer_no_schedule(project: ProjectInfo, node: NodeInfo) -> float:
    """100 / (1 + the number of PreferNoSchedule taints the project does not tolerate)."""
    count = sum(1 for t in node.taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(project, t))
    return MAX_SCORE / (1 + count)


@dataclass(frozen=True, slots=True)
class Weights:
    """Weights of the scores in the total (kube-scheduler's defaults: taints 3, resources 1, image 1)."""

    resources: float = 2.0
    taints: float = 3.0
    pull: float = 1.0


def resource_score(strategy: str) -> ScoreFunc:
    """The resource score of a strategy: `spread` → least_allocated, `binpack` → most_allocated."""
    if strategy == SPREAD:
        return least_allocated
    if strategy == BINPACK:
        return most_allocated
    raise ValueError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")


def total_score(project: ProjectInfo, node: NodeInfo, *, strategy: str = SPREAD, weights: Weights = Weights()) -> float:
    """The weighted sum of every score for placing `project` on `node`."""
    score = weights.resources * resource_score(strategy)(project, node)
    if node.taints:
        score += weights.taints * prefer_no_schedule(project, node)
    else:
        score += weights.taints * MAX_SCORE
    return score + weights.pull * pull_speed(project, node)


def scorer(project: ProjectInfo, *, strategy: str = SPREAD, weights: Weights = Weights()) -> NodeScore:
    """`total_score` of `project` as a function of the node alone, for one decision over many nodes: the same
    value for every node (same operations in the same order), with what depends only on the project, the
    strategy and the weights worked out once, and the taint and pull scores of a node without taints or without
    a measured download rate taken as the constants they are."""
    resource_score(strategy)  # refuses an unknown strategy
    spread = strategy == SPREAD
    wanted = _scored_requests(project)
    w_resources, w_taints, w_pull = weights.resources, weights.taints, weights.pull
    untainted = w_taints * MAX_SCORE
    unmeasured = w_pull * _pull_score(REFERENCE_PULL_SECONDS)

    def score(node: NodeInfo) -> float:
        used, declared = _mean_share_used(wanted, node)
        total = w_resources * (MAX_SCORE * (declared - used) if spread else MAX_SCORE * used)
        total += w_taints * prefer_no_schedule(project, node) if node.taints else untainted
        return total + (unmeasured if node.download is None else w_pull * pull_speed(project, node))

    return score


@functools.lru_cache(maxsize=65536)
def _name_hash(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")


def tie_break_key(project_name: str, node_name: str) -> tuple[int, str]:
    """Orders nodes of equal score: a stable hash of the node name mixed with one of the project name (lower
    first: each project sees the nodes in its own fixed order), then the node name."""
    return _name_hash(node_name) ^ _name_hash(project_name), node_name


__all__ = [
    "ASSUMED_IMAGE_BYTES",
    "BINPACK",
    "MAX_SCORE",
    "NodeScore",
    "REFERENCE_PULL_SECONDS",
    "SCORED_RESOURCES",
    "SPREAD",
    "STRATEGIES",
    "ScoreFunc",
    "Weights",
    "estimated_pull_seconds",
    "least_allocated",
    "most_allocated",
    "prefer_no_schedule",
    "pull_speed",
    "resource_score",
    "scorer",
    "tie_break_key",
    "total_score",
]
