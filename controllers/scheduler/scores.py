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


def _mean_share_used(project: ProjectInfo, node: NodeInfo) -> tuple[float, float]:
    """(mean share of cpu and memory used once the project is placed, mean share declared by the node): a
    resource the node does not declare counts as neither used nor free. Shares are clamped to 0…1."""
    used_total = declared = 0.0
    for name in SCORED_RESOURCES:
        capacity = node.allocatable.get(name, 0)
        if capacity <= 0:
            continue
        declared += 1.0
        share = (node.requested.get(name, 0) + project.requests.get(name, 0)) / capacity
        used_total += 1.0 if share > 1.0 else (share if share > 0.0 else 0.0)
    count = len(SCORED_RESOURCES)
    return used_total / count, declared / count


def least_allocated(project: ProjectInfo, node: NodeInfo) -> float:
    """Spread: the mean share of cpu and memory still free once the project is placed (0…100)."""
    used, declared = _mean_share_used(project, node)
    return MAX_SCORE * (declared - used)


def most_allocated(project: ProjectInfo, node: NodeInfo) -> float:
    """Bin-pack: the mean share of cpu and memory in use once the project is placed (0…100)."""
    return MAX_SCORE * _mean_share_used(project, node)[0]


def estimated_pull_seconds(project: ProjectInfo, node: NodeInfo) -> float | None:
    """Seconds to pull the project's images at the node's measured download rate; None when unmeasured."""
    if node.download is None or node.download <= 0:
        return None
    return max(1, len(project.images)) * ASSUMED_IMAGE_BYTES / node.download


def pull_speed(project: ProjectInfo, node: NodeInfo) -> float:
    """Advisory: 100 · R / (R + estimated pull seconds); 50 for an unmeasured node."""
    seconds = estimated_pull_seconds(project, node)
    if seconds is None:
        seconds = REFERENCE_PULL_SECONDS
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


def total_score(
    project: ProjectInfo, node: NodeInfo, *, strategy: str = SPREAD, weights: Weights = Weights()
) -> float:
    """The weighted sum of every score for placing `project` on `node`."""
    score = weights.resources * resource_score(strategy)(project, node)
    if node.taints:
        score += weights.taints * prefer_no_schedule(project, node)
    else:
        score += weights.taints * MAX_SCORE
    return score + weights.pull * pull_speed(project, node)


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
    "tie_break_key",
    "total_score",
]
