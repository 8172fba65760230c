"""What placement upkeep does to one project, and when, as a pure function (`plan`).

In order of precedence:

* **Being deleted** (`metadata.deletionTimestamp`) → nothing: a project on its way out is never moved.
* **Moving** (`status.move`: its node is taking the final backups before it returns to Pending) → nothing: the
  move under way ends it.
* **Failed or Succeeded with a new generation** (the spec changed, or `caractrl restart` stamped a service,
  after the agent last acted: `0 < status.observedGeneration < metadata.generation`) → back to Pending (reason
  SpecChanged) at once; the scheduler places it again, possibly on another node, and the old node's agent
  removes the old containers.
* **Scheduled or Running on a node with a `NoExecute` taint it does not tolerate** → moved (reason
  TaintEviction, `lifecycle.move`) with a hand-off: the old containers run until the project runs elsewhere (or
  the hand-off timeout); with backed-up volumes the node first stops it and takes the final backups. A
  toleration with `tolerationSeconds` delays this: the first sighting is stamped on the project (condition
  `TaintedAt`, transition time = first seen) and the move is due that many seconds later; the stamp is removed
  when the taint goes away.
* **Scheduled or Running, spec changed since binding** (`metadata.generation != status.scheduledGeneration`)
  → if the node no longer passes the node selector, the required node affinity, its NoSchedule taints, the
  resources (requests of the project plus the others bound there against allocatable) or its allowed host paths:
  moved (reason
  NodeNoLongerEligible; with backed-up volumes after the final backups, else at once); else the binding is
  confirmed for the new generation (`scheduledGeneration` updated).
* Anything else → nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from caravanserai import meta, v1
from caravanserai.clock import seconds
from caravanserai.controllers.scheduler.filters import (
    FilterContext,
    host_paths_allowed,
    node_affinity_matches,
    node_selector_matches,
    resources_fit,
    taints_tolerated,
)
from caravanserai.controllers.scheduler.snapshot import (
    NO_EXECUTE,
    NodeInfo,
    TaintInfo,
    TolerationInfo,
    node_spec_fields,
    project_info,
)
from caravanserai.project import lifecycle

CONDITION_TAINTED_AT = "TaintedAt"


class PlacementAction(enum.Enum):
    NONE = "none"
    TO_PENDING = "to-pending"
    STAMP_TAINTED = "stamp-tainted"  # a tolerated-for-a-while NoExecute taint was first seen
    CLEAR_TAINTED = "clear-tainted"  # the taint is gone
    CONFIRM = "confirm"  # the node still fits the new generation


@dataclass(frozen=True, slots=True)
class PlacementStep:
    """`action` due at `due` (wall-clock seconds), with the reason and message to record; `handoff` says whether
    the old containers keep running until the project runs elsewhere."""

    action: PlacementAction
    due: float = 0.0
    reason: str = ""
    message: str = ""
    handoff: bool = False


def _tolerations(project: v1.Project, taint: TaintInfo) -> list[v1.Toleration]:
    return [
        t
        for t in project.spec.tolerations
        if TolerationInfo(t.key, t.operator or "Equal", t.value, t.effect).tolerates(taint)
    ]


def no_execute_deadline(project: v1.Project, node: v1.Node) -> tuple[float | None, str]:
    """Seconds the project may stay after first seeing the node's NoExecute taints (0: must go now; None: may stay
    forever), and the taint that decides it."""
    _, _, taints, _ = node_spec_fields(node)
    shortest: float | None = None
    which = ""
    for taint in taints:
        if taint.effect != NO_EXECUTE:
            continue
        matching = _tolerations(project, taint)
        if not matching:
            return 0.0, str(taint)
        if any(not t.HasField("toleration_seconds") for t in matching):
            continue  # tolerated forever
        limit = float(max(t.toleration_seconds for t in matching))
        if shortest is None or limit < shortest:
            shortest, which = limit, str(taint)
    return shortest, which


def still_eligible(project: v1.Project, node: v1.Node, others_requested: Mapping[str, int]) -> str | None:
    """None when `node` still takes `project` as its spec is now; else why not ("node selector mismatch" …)."""
    labels, _, taints, allocatable = node_spec_fields(node)
    info = project_info(project)
    node_info = NodeInfo(
        node.metadata.name,
        labels,
        taints=taints,
        allocatable=allocatable,
        requested=dict(others_requested),
        allowed_host_paths=tuple(node.status.allowed_host_paths),
    )
    ctx = FilterContext(now=0.0)
    for check in (node_selector_matches, node_affinity_matches, taints_tolerated, resources_fit, host_paths_allowed):
        rejection = check(info, node_info, ctx)
        if rejection is not None:
            return rejection.reason
    return None


def plan(
    project: v1.Project, node: v1.Node | None, *, others_requested: Mapping[str, int], now: float
) -> PlacementStep:
    """The step for `project` bound to `node` (None: unknown node, the garbage collector's case)."""
    status, generation = project.status, project.metadata.generation
    if project.metadata.HasField("deletion_timestamp") or status.HasField("move"):
        return PlacementStep(PlacementAction.NONE)
    if status.phase in lifecycle.FINISHED and 0 < status.observed_generation < generation:
        message = f"Spec changed (generation {generation}) after the project was {status.phase}; placing it again"
        return PlacementStep(PlacementAction.TO_PENDING, now, lifecycle.REASON_SPEC_CHANGED, message)
    if status.phase not in (v1.SCHEDULED, v1.RUNNING) or node is None:
        return PlacementStep(PlacementAction.NONE)
    taint_step = _taint_step(project, node, now)
    if taint_step.action is PlacementAction.TO_PENDING and taint_step.due <= now:
        return taint_step
    if status.scheduled_generation and status.scheduled_generation != generation:
        why = still_eligible(project, node, others_requested)
        if why is not None:
            message = f"Node {node.metadata.name} no longer fits the changed spec ({why}); placing it again"
            return PlacementStep(PlacementAction.TO_PENDING, now, lifecycle.REASON_NODE_NO_LONGER_ELIGIBLE, message)
        if taint_step.action is PlacementAction.NONE:
            return PlacementStep(PlacementAction.CONFIRM, now)
    return taint_step


def _taint_step(project: v1.Project, node: v1.Node, now: float) -> PlacementStep:
    limit, taint = no_execute_deadline(project, node)
    stamp = meta.get_condition(project.status.conditions, CONDITION_TAINTED_AT)
    name = node.metadata.name
    if limit is None:
        cleared = PlacementAction.CLEAR_TAINTED
        return PlacementStep(cleared, now) if stamp is not None else PlacementStep(PlacementAction.NONE)
    message = f"Node {name} has taint {taint} that the project does not tolerate"
    eviction = lifecycle.REASON_TAINT_EVICTION
    if limit == 0:
        return PlacementStep(PlacementAction.TO_PENDING, now, eviction, message + "; moving it", handoff=True)
    tolerated = f"Node {name} has taint {taint}, tolerated for {limit:g}s"
    if stamp is None or not stamp.HasField("last_transition_time"):
        return PlacementStep(PlacementAction.STAMP_TAINTED, now, eviction, tolerated)
    due = seconds(stamp.last_transition_time) + limit
    return PlacementStep(PlacementAction.TO_PENDING, due, eviction, tolerated + "; moving it", handoff=True)


__all__ = [
    "CONDITION_TAINTED_AT",
    "PlacementAction",
    "PlacementStep",
    "no_execute_deadline",
    "plan",
    "still_eligible",
]
