"""The statuses the scheduler writes, as pure functions from a cached project to the project to store.

* `bound`: phase Scheduled, `node_ref`, condition Scheduled=True and the Phase condition, both with reason
  Scheduled and the message "Bound to node X", and `placement` (the estimates for the chosen node and the
  runner-up, `estimates.py`) and `scores` (their scores by plugin, `explain.py`) in the same write; a bind
  without them clears an earlier binding's. A bound project has no nominated node.
* `unschedulable`: phase stays Pending; condition Scheduled=False and the Phase condition, both with reason
  Unschedulable and the diagnosis message. Returns None when both already say exactly that, so an unchanged
  verdict is never written again. Without preemption under way, an Unschedulable verdict ends any nomination.
* `nominated`: `unschedulable` with `nominatedNodeName` set: the project preempted others on that node and waits
  for the room they leave.

Both return a copy: the cached project is never changed.
"""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.project import lifecycle

REASON_SCHEDULED = lifecycle.REASON_SCHEDULED
REASON_UNSCHEDULABLE = lifecycle.REASON_UNSCHEDULABLE
EVENT_SCHEDULED = "Scheduled"
EVENT_FAILED_SCHEDULING = "FailedScheduling"


def bound_message(node: str) -> str:
    return f"Bound to node {node}"


def bound(
    project: v1.Project,
    node: str,
    *,
    now: float,
    placement: v1.PlacementEstimates | None = None,
    scores: v1.PlacementScores | None = None,
) -> v1.Project:
    """`project` bound to `node` (a copy, to be written with UpdateStatus): `lifecycle.bind`, with `placement`
    and `scores` (an earlier binding's are cleared when not given)."""
    out = lifecycle.bind(project, node, now=now)
    out.status.nominated_node_name = ""
    if placement is None:
        out.status.ClearField("placement")
    else:
        out.status.placement.CopyFrom(placement)
    if scores is None:
        out.status.ClearField("placement_scores")
    else:
        out.status.placement_scores.CopyFrom(scores)
    return out


def says_unschedulable(project: v1.Project, message: str) -> bool:
    """Whether the project's conditions already report `message` as its Unschedulable verdict."""
    scheduled = meta.get_condition(project.status.conditions, v1.CONDITION_SCHEDULED)
    phase = meta.get_condition(project.status.conditions, v1.CONDITION_PHASE)
    return (
        scheduled is not None
        and phase is not None
        and (scheduled.status, scheduled.reason, scheduled.message) == (v1.FALSE, REASON_UNSCHEDULABLE, message)
        and (phase.reason, phase.message) == (REASON_UNSCHEDULABLE, message)
    )


def unschedulable(project: v1.Project, message: str, *, now: float) -> v1.Project | None:
    """`project` marked Unschedulable with `message` (a copy, `lifecycle.unschedulable`), or None when it
    already is."""
    if says_unschedulable(project, message) and not project.status.nominated_node_name:
        return None
    out = lifecycle.unschedulable(project, message, now=now)
    out.status.nominated_node_name = ""
    return out


def nominated(project: v1.Project, node: str, message: str, *, now: float) -> v1.Project:
    """`project` still Pending (Unschedulable with `message`) and nominated to `node` (a copy)."""
    out = lifecycle.unschedulable(project, message, now=now)
    out.status.nominated_node_name = node
    return out


__all__ = [
    "EVENT_FAILED_SCHEDULING",
    "EVENT_SCHEDULED",
    "REASON_SCHEDULED",
    "REASON_UNSCHEDULABLE",
    "bound",
    "bound_message",
    "nominated",
    "says_unschedulable",
    "unschedulable",
]
